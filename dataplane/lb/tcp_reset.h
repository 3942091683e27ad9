// A connection the service stage refuses (a new TCP flow while the gateway drains) is answered
// with a RST, so the client fails over at once instead of retrying its SYN into silence.
// Worker lcores.
#pragma once

#include <cstdint>

#include "dataplane/packet/parse.h"
#include "dataplane/worker/context.h"

namespace meshgate::dp {

// True for the segments refused with a RST: a SYN without ACK (RST) opening a connection.
// Anything else without a flow (a mid-stream segment of a flow another gateway held) is only
// dropped: a RST would end a connection that may still live elsewhere.
inline bool refusable_syn(const PacketMeta& m) {
  return m.l4_proto == kProtoTcp && m.has_l4() && !m.is_fragment() &&
         (m.tcp_flags & (kTcpSyn | kTcpAck | kTcpRst)) == kTcpSyn;
}

// Builds the RST answering the SYN parsed as `m` in `frame` (contiguous up to the end of its
// TCP header) into `out` (capacity `cap`), leaving `l2_len` bytes of Ethernet header for the
// route stage: from the SYN's destination to its source, ports swapped, no options, window 0,
// RFC 9293 3.10.7.1 <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. Returns the frame length, or 0
// when it does not fit. Pure function over bytes.
uint32_t build_tcp_reset(uint8_t* out, uint32_t cap, uint32_t l2_len, const uint8_t* frame,
                         const PacketMeta& m);

// Sends the RST refusing packet `i` (a refusable_syn) in its place in the burst (the caller
// drops the SYN under its reason); counted in `generated` and `resets_sent`.
void send_tcp_reset(WorkerCtx& c, Burst& b, const rte_mbuf* mb, uint16_t i);

}  // namespace meshgate::dp
