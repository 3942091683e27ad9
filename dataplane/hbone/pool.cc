#include "dataplane/hbone/pool.h"

#include <algorithm>

namespace meshgate::dp::hbone {

PoolKey::PoolKey(std::string src_id, std::vector<std::string> dst_ids, IpAddr dst, uint16_t port,
                 IpAddr src)
    : src_identity(std::move(src_id)), dst_identities(std::move(dst_ids)), dst_ip(dst),
      dst_port(port), src_ip(src) {
  std::sort(dst_identities.begin(), dst_identities.end());
  dst_identities.erase(std::unique(dst_identities.begin(), dst_identities.end()),
                       dst_identities.end());
}

Pool::Checkout Pool::acquire(const PoolKey& key, uint64_t) {
  KeyState& ks = keys_[key];
  // The fullest connection with room: keeps streams packed so idle ones can be released.
  ConnId best = 0;
  uint32_t best_streams = 0;
  for (ConnId id : ks.conns) {
    const Conn& c = conns_.at(id);
    if (c.state != State::kReady || c.streams >= c.max_streams) continue;
    if (best == 0 || c.streams > best_streams) {
      best = id;
      best_streams = c.streams;
    }
  }
  if (best != 0) {
    ++conns_.at(best).streams;
    return {Action::kUse, best};
  }
  if (ks.dialing) return {Action::kWait, 0};
  const ConnId id = next_id_++;
  Conn c;
  c.key = key;
  conns_.emplace(id, std::move(c));
  ks.conns.push_back(id);
  ks.dialing = true;
  return {Action::kDial, id};
}

void Pool::dial_done(ConnId conn, bool ok, uint32_t peer_max_streams, uint64_t now_ms) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.state != State::kDialing) return;
  keys_.at(it->second.key).dialing = false;
  if (!ok) {
    forget(conn);
    return;
  }
  it->second.state = State::kReady;
  it->second.max_streams = std::min(limits_.max_streams_per_connection, peer_max_streams);
  it->second.idle_since_ms = now_ms;
}

bool Pool::release(ConnId conn, uint64_t now_ms) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.streams == 0) return false;
  Conn& c = it->second;
  if (--c.streams == 0) {
    c.idle_since_ms = now_ms;
    if (c.state == State::kRetired) {
      forget(conn);
      return true;
    }
  }
  return false;
}

bool Pool::retire(ConnId conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return false;
  if (it->second.state == State::kDialing) keys_.at(it->second.key).dialing = false;
  it->second.state = State::kRetired;
  if (it->second.streams == 0) {
    forget(conn);
    return true;
  }
  return false;
}

std::vector<Pool::ConnId> Pool::expire(uint64_t now_ms) {
  std::vector<ConnId> out;
  for (const auto& [id, c] : conns_)
    if (c.state == State::kReady && c.streams == 0 && now_ms - c.idle_since_ms >= limits_.idle_release_ms)
      out.push_back(id);
  for (ConnId id : out) forget(id);
  return out;
}

size_t Pool::connections(const PoolKey& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.conns.size();
}

size_t Pool::streams(ConnId conn) const {
  auto it = conns_.find(conn);
  return it == conns_.end() ? 0 : it->second.streams;
}

void Pool::forget(ConnId conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  auto ks = keys_.find(it->second.key);
  if (ks != keys_.end()) {
    std::erase(ks->second.conns, conn);
    if (ks->second.conns.empty() && !ks->second.dialing) keys_.erase(ks);
  }
  conns_.erase(it);
}

}  // namespace meshgate::dp::hbone
