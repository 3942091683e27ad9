// The originating side's HBONE connection pool (docs/HBONE.md "Pool"), as pure logic: it
// decides, the caller dials and runs the Connections. Keyed by (source identity, expected
// destination identities, destination ip:port, source IP); at most
// min(100, peer's SETTINGS_MAX_CONCURRENT_STREAMS) streams per connection; one dial per key at
// a time; a connection idle for 5 minutes is released. Single owner (one worker); no clock of
// its own: the caller passes the time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/common/net_types.h"

namespace meshgate::dp::hbone {

struct PoolKey {
  std::string src_identity;
  std::vector<std::string> dst_identities;  // kept sorted: the same set is the same key
  IpAddr dst_ip;
  uint16_t dst_port = 15008;
  IpAddr src_ip;

  PoolKey() = default;
  PoolKey(std::string src_id, std::vector<std::string> dst_ids, IpAddr dst, uint16_t port, IpAddr src);
  friend auto operator<=>(const PoolKey&, const PoolKey&) = default;
};

struct PoolLimits {
  uint32_t max_streams_per_connection = 100;
  uint64_t idle_release_ms = 5 * 60 * 1000;
};

class Pool {
 public:
  using ConnId = uint64_t;
  enum class Action : uint8_t {
    kUse,   // a stream slot on `conn` is now held: open the stream on it
    kDial,  // dial a new connection `conn`, then report dial_done(); retry acquire() after
    kWait,  // a dial for this key is in flight: retry acquire() after its dial_done()
  };
  struct Checkout {
    Action action;
    ConnId conn = 0;
  };

  explicit Pool(const PoolLimits& limits = {}) : limits_(limits) {}

  Checkout acquire(const PoolKey& key, uint64_t now_ms);
  // The dial of `conn` finished. On success the connection takes streams up to
  // min(limit, peer_max_streams); on failure it is forgotten (the next acquire dials again).
  void dial_done(ConnId conn, bool ok, uint32_t peer_max_streams, uint64_t now_ms);
  // A stream on `conn` ended. Returns true when the caller should close the connection now
  // (it was retired and this was its last stream).
  bool release(ConnId conn, uint64_t now_ms);
  // GOAWAY received or the connection failed: no new streams on it. Returns true when it has
  // no streams left (close it now); otherwise release() says when.
  bool retire(ConnId conn);
  // Connections idle for idle_release_ms: forgotten here; the caller closes them (GOAWAY).
  std::vector<ConnId> expire(uint64_t now_ms);

  size_t connections(const PoolKey& key) const;
  size_t streams(ConnId conn) const;
  size_t size() const { return conns_.size(); }

 private:
  enum class State : uint8_t { kDialing, kReady, kRetired };
  struct Conn {
    PoolKey key;
    State state = State::kDialing;
    uint32_t streams = 0;
    uint32_t max_streams = 0;
    uint64_t idle_since_ms = 0;
  };
  struct KeyState {
    std::vector<ConnId> conns;
    bool dialing = false;
  };
  void forget(ConnId conn);

  PoolLimits limits_;
  std::map<PoolKey, KeyState> keys_;
  std::unordered_map<ConnId, Conn> conns_;
  ConnId next_id_ = 1;
};

}  // namespace meshgate::dp::hbone
