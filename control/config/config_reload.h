// What a reload of the static config may change while the gateway runs (config/README.md
// "Reloading"). Pure functions of two parsed configs, the running one and the file's new one;
// the runtime (control/runtime/runtime.cc, GatewayRun::reload) applies a config only when
// restart_only_changes() finds nothing. Control thread (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/config/config.h"

namespace meshgate::ctl {

// Every difference between `running` and `next` that only a restart can apply, one error per
// key, positioned at the key in `next`'s file (position_of; a removed key or table points at
// its enclosing table, or the file). Empty: `next` may replace `running` live.
//
// Restart-only, because something sized or started from it at start-up would have to be
// rebuilt under running flows: [[port]] (devices, queues, addresses, the mbuf pool), [gateway]
// workers (lcores, queues, per-worker tables) and locality (the mesh mapping's), [conntrack]
// max_flows (the flow tables), [proxy] max_connections / buffer_bytes / memory_mb (the TCB
// tables and the mbuf budget), [fullnat] local_addresses (flow steering and the reply
// predictors), and every key of [mesh], [hbone], [control], [admin] and [bgp] (the providers,
// TLS and the CA client, the builder's threads, the admin socket, the BGP daemon).
// Also restart-only: services or listeners that need the workers' TCP stack when the running
// config has none (uses_proxy / uses_hbone), more proxy VIPs than the stack's listener slots
// (proxy_listener_slots), and deny signatures when the running config has none (the workers'
// inspection memory is set up only then).
// Everything else is live: every key of [[service]], [[listener]], [[route]], [[neighbor]]
// (keys added there later included), the [conntrack] timeouts, [proxy] idle_timeout_s and
// time_wait_s, [gateway] drain_timeout_ms and watch_config.
ConfigErrors restart_only_changes(const Config& running, const Config& next);

// The proxy's listener slots per worker (dp::tcp::TcpConfig::max_listeners) for a config: twice
// its static proxy VIPs and listeners, at least 64 (1024 when the mesh may add proxy services).
uint32_t proxy_listener_slots(const Config& cfg);
// True when some proxy service or listener has deny signatures.
bool uses_deny(const Config& cfg);

// What a live reload changes, for its log line and the POST /reload answer. Services and
// listeners are matched by name; "changed" means any key differs.
struct ConfigChanges {
  uint32_t services_added = 0;
  uint32_t services_removed = 0;
  uint32_t services_changed = 0;
  uint32_t listeners_added = 0;
  uint32_t listeners_removed = 0;
  uint32_t listeners_changed = 0;
  // Other live keys that differ, as table names: "route", "neighbor", "conntrack", "proxy",
  // "gateway".
  std::vector<std::string> other;
  bool empty() const;
};
ConfigChanges live_changes(const Config& running, const Config& next);

}  // namespace meshgate::ctl
