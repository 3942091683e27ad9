// The proxy's deny signatures (docs/NAMES.md): each session of a proxy service or listener with
// a deny set streams its client's first inspect_bytes through Hyperscan (names::DenyStream, its
// state a block of the worker's arena); a match resets both sides before the bytes that
// completed it reach the backend.
#include <rte_mbuf.h>

#include "dataplane/proxy/proxy.h"
#include "dataplane/snapshot/snapshot.h"
#include "dataplane/worker/counters.h"

namespace meshgate::dp {

bool Proxy::open_inspection(Session* s, uint32_t deny) {
  if (deny == 0 || snap_ == nullptr) return true;
  const SnapDeny& d = snap_->deny_sets[deny - 1];
  if (d.inspect_bytes == 0) return true;
  if (s->deny.open(*d.set, arena_, d.inspect_bytes) == names::DenyOpen::kOpened) return true;
  // Fail closed: a connection the signatures cannot see does not pass.
  count(kPxInspectFailed);
  end(s, true, true, AccessEnd::kInspectFailed);
  return false;
}

bool Proxy::inspect(Session* s, rte_mbuf* chain) {
  // The set this session's service or listener has now: a stream opened on another one (the
  // configuration changed) stops inspecting (DenyStream::scan).
  tcp::TcpConnInfo ci;
  const SnapDeny* d = nullptr;
  const SnapService* svc = stack_.info(s->conn[0], &ci) ? entry_of(ci.tuple) : nullptr;
  if (svc != nullptr) {
    const uint32_t deny = svc->listener != 0 ? snap_->listeners[svc->listener - 1].deny : svc->deny;
    if (deny != 0) d = &snap_->deny_sets[deny - 1];
  }
  hs_scratch_t* scratch = snap_ != nullptr ? snap_->name_scratch_for(d_.worker) : nullptr;
  for (rte_mbuf* m = chain; m != nullptr && s->deny.active(); m = m->next) {
    const int32_t hit = s->deny.scan(d != nullptr ? d->set.get() : nullptr,
                                     rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, scratch);
    if (hit < 0) {
      if (s->deny.status() != names::DenyStatus::kError) continue;
      count(kPxInspectFailed);  // fail closed, as when the stream could not open
      end(s, true, true, AccessEnd::kInspectFailed);
      return false;
    }
    count(kPxSignatureBlocked);
    counter_add(deny_counters_[d->stat_ids[uint32_t(hit)]], 1);
    end(s, true, true, AccessEnd::kDenySignature);
    return false;
  }
  return true;
}

}  // namespace meshgate::dp
