#include "dataplane/nat/fullnat_source.h"

#include <arpa/inet.h>

#include <vector>

#include "dataplane/conntrack/conntrack.h"
#include "dataplane/nat/rss.h"
#include "dataplane/route/route.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/tcp/tcp_stack.h"

namespace meshgate::dp {
namespace {

// The port a packet to `a` leaves through, or -1 (no route): the reply from `a` comes back in
// on it, so its RSS decides which worker sees the reply.
bool is_echo(uint8_t proto) { return proto == kProtoIcmp || proto == kProtoIcmp6; }

}  // namespace

void FullnatSource::init(const FullnatSourceDeps& d) {
  d_ = d;
  // Spread the workers' walks.
  cursor_ = d_.index * 7919u;
}

bool FullnatSource::begin(const Snapshot& snap, const IpAddr& remote, uint16_t remote_port_be,
                          uint8_t proto, uint32_t flow_hash, FullnatChoice* c) const {
  const std::vector<LocalNat>& pool = remote.is_v4() ? snap.fullnat_v4 : snap.fullnat_v6;
  if (pool.empty()) return false;
  c->local = &pool[flow_hash % pool.size()];
  c->remote = remote;
  c->remote_port_be = remote_port_be;
  c->proto = proto;
  const int port = egress_port(snap, remote);
  c->rss = port >= 0 && !d_.flow_steered[port] ? d_.rss[port] : nullptr;
  c->rss_fixed = c->rss ? c->rss->fixed_hash(remote, c->local->address, remote_port_be) : 0;
  c->candidates = 0;
  return true;
}

bool FullnatSource::port_ok(FullnatChoice& c, uint16_t port) const {
  if (port % d_.n_workers != d_.index) return false;
  if (c.rss && c.candidates++ < kFullnatRssTries &&
      c.rss->queue_of(c.rss->with_dport(c.rss_fixed, c.remote.is_v4(), port)) != d_.index) {
    return false;
  }
  const uint16_t port_be = htons(port);
  const Tuple reply{c.remote, c.local->address, is_echo(c.proto) ? port_be : c.remote_port_be,
                    port_be, c.proto};
  if (d_.flows != nullptr && d_.flows->reply_in_use(reply, FlowTable::hash(reply))) return false;
  return !(stack_ != nullptr && c.proto == kProtoTcp &&
           stack_->state_of(tcp::TcpTuple{c.local->address, c.remote, port,
                                          ntohs(c.remote_port_be)}) != tcp::TcpState::kClosed);
}

bool FullnatSource::pick(const Snapshot& snap, const IpAddr& backend, uint16_t backend_port_be,
                         uint8_t proto, uint32_t flow_hash, FlowTarget* to, Drop* why) {
  FullnatChoice c;
  if (!begin(snap, backend, backend_port_be, proto, flow_hash, &c)) {
    *why = Drop::kFullnatNoAddress;
    return false;
  }
  // Only ports of this worker's residue are walked (port_ok() would refuse the others).
  const uint32_t nw = d_.n_workers;
  const uint32_t first = kFullnatFirstPort + (d_.index + nw - kFullnatFirstPort % nw) % nw;
  const uint32_t count = (65535 - first) / nw + 1;
  for (uint32_t tries = 0; tries < kFullnatMaxTries; ++tries) {
    cursor_ = (cursor_ + 1) % count;
    const uint16_t port = uint16_t(first + cursor_ * nw);
    if (!port_ok(c, port)) continue;
    to->local_id = c.local->id;
    to->local_port = htons(port);
    if (is_echo(proto)) to->backend_port = to->local_port;
    return true;
  }
  *why = Drop::kFullnatNoPort;
  return false;
}

}  // namespace meshgate::dp
