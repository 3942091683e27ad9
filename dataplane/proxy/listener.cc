// The proxy's [[listener]] connections (docs/NAMES.md), from accept to routing: the client's
// first bytes are read (at most the listener's peek_bytes, within peek_timeout_ms) and held,
// the name is extracted from them (TLS ClientHello server_name, HTTP/1.x Host), the listener's
// matcher picks the route, the route's service picks the backend with its Maglev table, and the
// held bytes go first to the backend (or into the HBONE stream) before the splice takes over.
#include <rte_mbuf.h>

#include "dataplane/names/name_extract.h"
#include "dataplane/names/name_matcher.h"
#include "dataplane/proxy/proxy.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/worker/counters.h"

namespace meshgate::dp {

using tcp::TcpConnId;
using tcp::TcpTuple;

namespace {
constexpr int kClient = 0;
// What the extraction attempts of a connection may copy and parse together, in peek_bytes,
// before the proxy waits for the peek limit (or the client's FIN) to try once more: each
// attempt copies the held bytes, so a client sending its request head a line at a time cannot
// make the worker copy peek_bytes for every segment. A budget of bytes, not of attempts: a
// ClientHello in 1-byte records (RFC 8446 §5.1 lets a client cut it anywhere) takes some 20 to
// 40 attempts, following the extractor's `need`, which copy about 20 to 40 times its length
// (tests/unit/names/name_extract_test.cc), and an HTTP head a line at a time as many lines as
// fit.
constexpr uint32_t kParseBudget = 48;
// The access log's end reason of a listener connection rejected for `why` (`fin`: the client
// had sent its FIN).
AccessEnd access_end_of(ListenerCounter why, bool fin) {
  switch (why) {
    case kLsNoName: return AccessEnd::kNoName;
    case kLsNoRoute: return AccessEnd::kNoRoute;
    case kLsMalformed: return AccessEnd::kMalformed;
    case kLsPeekLimit: return AccessEnd::kPeekLimit;
    case kLsPeekTimeout: return AccessEnd::kPeekTimeout;
    case kLsNoService: return AccessEnd::kNoService;
    case kLsNoBackend: return AccessEnd::kNoBackend;
    default: return fin ? AccessEnd::kClientFin : AccessEnd::kClientReset;
  }
}

}  // namespace

void Proxy::lcount(uint32_t stat, ListenerCounter c) {
  counter_add(listener_counters_[stat].v[c], 1);
}

void Proxy::start_peek(TcpConnId c, const SnapService& svc) {
  const SnapListener& l = snap_->listeners[svc.listener - 1];
  lcount(l.stat_id, kLsAccepted);
  Session* s = open_session(c);
  if (s == nullptr) return;
  s->peeking = true;
  s->listener_stat = l.stat_id;
  if (SessionLog* sl = session_log(s)) access_copy(sl->names.listener, l.name);
  idle_wheel_.schedule(&s->idle, now_ms() + l.peek_timeout_ms);
  peek(s, false);  // the handshake's last ACK may have carried data
}

void Proxy::reject(Session* s, ListenerCounter why) {
  lcount(s->listener_stat, why);
  end(s, true, false, access_end_of(why, s->fin_in[kClient]));
}

void Proxy::peek(Session* s, bool fin) {
  const TcpConnId c = s->conn[kClient];
  tcp::TcpConnInfo ci;
  if (!stack_.info(c, &ci)) return;
  const TcpTuple t = ci.tuple;
  const SnapService* svc = entry_of(t);
  if (svc == nullptr || svc->listener == 0) {
    count(kPxRefusedNoService);  // the listener left the configuration
    end(s, true, false, AccessEnd::kNoService);
    return;
  }
  const SnapListener& l = snap_->listeners[svc->listener - 1];
  s->listener_stat = l.stat_id;
  if (fin) {
    s->fin_in[kClient] = true;  // passed on once the held bytes reach the backend
    if (s->first_fin < 0) s->first_fin = kClient;
  }
  bool grew = false;
  bool full = false;
  while (s->held < l.peek_bytes) {
    uint32_t len = 0;
    rte_mbuf* m = stack_.recv_chain(c, &len, l.peek_bytes - s->held);
    if (m == nullptr) break;
    if (s->pending[kClient] == nullptr) {
      s->pending[kClient] = m;
    } else if (rte_pktmbuf_chain(s->pending[kClient], m) != 0) {
      rte_pktmbuf_free(m);  // more segments than a chain holds: as good as the limit
      full = true;
      break;
    }
    s->held += len;
    grew = true;
  }
  full = full || s->held >= l.peek_bytes ||
         (stack_.info(c, &ci) && ci.recv_queued > 0);  // the next segment does not fit
  if (!grew && !fin && !full) return;
  if (s->held == 0) {
    // Nothing read: the client closed, or its first segment alone is past peek_bytes.
    if (fin || full) reject(s, fin ? kLsClientClosed : kLsPeekLimit);
    return;
  }
  // Try when the extractor said enough may be there, within the attempt budget; always once
  // more at the limit or the FIN, when no more bytes will come.
  const bool last = full || fin;
  if (!last && (s->held < s->need || s->parsed + s->held > kParseBudget * l.peek_bytes)) return;
  s->parsed += s->held;
  rte_mbuf* head = s->pending[kClient];
  const uint8_t* bytes =
      static_cast<const uint8_t*>(rte_pktmbuf_read(head, 0, s->held, peek_buf_.get()));
  names::Name& name = *peek_name_;
  const names::ExtractResult r = l.source == NameSource::kSni
                                     ? names::extract_sni(bytes, s->held, &name)
                                     : names::extract_host(bytes, s->held, &name);
  switch (r.status) {
    case names::Extract::kNeedMore:
      s->need = r.need;
      if (r.need > l.peek_bytes || full) {
        reject(s, kLsPeekLimit);
      } else if (fin) {
        reject(s, kLsClientClosed);
      }
      return;
    case names::Extract::kMalformed:
      reject(s, kLsMalformed);
      return;
    case names::Extract::kNoName:
      if (l.default_route < 0) {
        reject(s, kLsNoName);
      } else {
        route(s, t, l, l.default_route, kLsDefaulted);
      }
      return;
    case names::Extract::kFound:
      break;
  }
  const int32_t match =
      l.names != nullptr ? l.names->match(name.view(), snap_->name_scratch_for(d_.worker)) : -1;
  if (match >= 0) {
    route(s, t, l, int32_t(l.pattern_route[uint32_t(match)]), kLsRouted);
  } else if (l.default_route >= 0) {
    route(s, t, l, l.default_route, kLsDefaulted);
  } else {
    reject(s, kLsNoRoute);
  }
}

void Proxy::route(Session* s, const TcpTuple& t, const SnapListener& l, int32_t ri,
                  ListenerCounter why) {
  const SnapRoute& r = l.routes[uint32_t(ri)];
  if (r.service < 0) {
    reject(s, kLsNoService);
    return;
  }
  const SnapService& svc = snap_->services[uint32_t(r.service)];
  if (svc.table_size == 0) {
    count(kPxNoBackend);
    reject(s, kLsNoBackend);
    return;
  }
  lcount(l.stat_id, why);
  if (why != kLsRouted) lcount(l.stat_id, kLsRouted);
  s->peeking = false;
  s->route_stat = r.stat_id;
  counter_add(route_counters_[r.stat_id].connections, 1);
  // The held bytes are the first the signatures see (HBONE-bound ones included; the rest of a
  // tunnelled stream is the originator's).
  if (!open_inspection(s, l.deny)) return;
  if (s->deny.active() && !inspect(s, s->pending[kClient])) return;
  uint32_t h = 0;
  const SnapBackend& be = pick(svc, t, &h);
  if (be.tunnel == Tunnel::kHbone && originate_ != nullptr) {
    // The originator takes the client connection and the bytes read so far.
    count(kPxHboneOriginated);
    const TcpConnId c = s->conn[kClient];
    rte_mbuf* head = s->pending[kClient];
    s->pending[kClient] = nullptr;
    s->conn[kClient] = tcp::kNoConn;
    free_session(s);
    originate_(originate_ctx_, c, svc, be, head, &route_counters_[r.stat_id]);
    return;
  }
  // The held bytes stay in pending[client]: pump() sends them first once the backend connects.
  connect_backend(s, t, svc, be, h);
}

}  // namespace meshgate::dp
