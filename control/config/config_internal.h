// What the config's three passes share: the parser (config_parse.cc), the validator
// (config_validate.cc) and the suggestions both attach to their messages (config_suggest.cc).
// Here: the keys each table accepts, the integer ranges, and the helpers that name keys and
// values in messages (defined in config_error.cc). Private to control/config/.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/config/config.h"

namespace meshgate::ctl::config_detail {

// Where every key was written ("service[0].backend[1].port" -> file:line:col).
using Positions = std::map<std::string, SourcePos, std::less<>>;
// Keys the parser reported: the validator leaves them (and what they hold) alone.
using KeySet = std::set<std::string, std::less<>>;

// An integer key's accepted values. `what` replaces "an integer lo..hi" in messages when the
// plain range does not say everything (e.g. table_size must also be prime).
struct IntSpec {
  int64_t lo;
  int64_t hi;
  const char* what = nullptr;
};

inline constexpr IntSpec kWorkersSpec{1, kMaxWorkers};
inline constexpr IntSpec kBuildThreadsSpec{0, kMaxBuildThreads, "0 (automatic) or 1..64 threads"};
inline constexpr IntSpec kDrainTimeoutSpec{0, kMaxDrainTimeoutMs};
inline constexpr IntSpec kL4PortSpec{1, 65535};
// BGP: AS 0 is reserved (RFC 7607); four-octet AS numbers (RFC 6793). Hold time: RFC 4271 §4.2
// allows 0 or at least 3 seconds; 0 (no keepalives) would never notice a dead gateway.
inline constexpr IntSpec kAsSpec{1, 4294967295};
inline constexpr IntSpec kHoldTimeSpec{3, 65535};
inline constexpr IntSpec kWithdrawWaitSpec{0, 600000};
// Requested certificate lifetime: renewal at half-life must leave time for retries.
inline constexpr IntSpec kCertTtlSpec{60, 31536000};
// Smaller rings cannot hold one burst per queue with headroom; larger ones only add latency and
// cache misses. PMDs round to their own limits in rte_eth_dev_adjust_nb_rx_tx_desc().
inline constexpr IntSpec kDescriptorsSpec{64, 16384};
// RFC 791: every IPv4 host must accept 576-byte datagrams; 9000 is the usual jumbo frame.
inline constexpr IntSpec kMtuSpec{576, 9000};
// RFC 8200 §5: IPv6 requires links with an MTU of at least 1280.
inline constexpr int64_t kMinIpv6Mtu = 1280;
// IPVS weights are 0..65535; keeping to it lets weights move between the two unchanged.
inline constexpr IntSpec kWeightSpec{0, 65535};
// Largest prime below 2^22: a service's Maglev table stays within 16 MiB of 4-byte slots.
inline constexpr int64_t kMaxTableSize = 4194301;
inline constexpr int64_t kMinTableSize = 7;
inline constexpr IntSpec kTableSizeSpec{0, kMaxTableSize, "0 (automatic) or a prime 7..4194301"};
// Below 1024 the per-worker tables are too small to be useful; 2^26 flows is already ~8 GiB.
inline constexpr IntSpec kMaxFlowsSpec{1024, 67108864};
// [[listener]]: at least a ClientHello's fixed part; at most 64 KiB (the largest TLS handshake
// message a peek holds is far below it), and never above the backend connection's send buffer
// (the bytes read are replayed to the backend in one piece: checked against [proxy] buffer_bytes).
inline constexpr IntSpec kPeekBytesSpec{512, dp::kMaxPeekBytes};
// Milliseconds: below 100 a client across a WAN cannot send its first flight in time.
inline constexpr IntSpec kPeekTimeoutSpec{100, 120000};
// Deny signatures: 0 (off) up to 16 MiB of each client stream.
inline constexpr IntSpec kInspectBytesSpec{0, 16777216};
// Seconds; one week bounds how long a forgotten flow can pin a table slot.
inline constexpr IntSpec kTimeoutSpec{1, 604800};
// [proxy]. Idle timeout: 0 (none) up to a week, like the conntrack timeouts.
inline constexpr IntSpec kProxyIdleSpec{0, 604800};
// TCBs per worker: below 64 a worker cannot hold a handful of sessions and their TIME-WAITs;
// 2^22 TCBs are 4 GiB.
inline constexpr IntSpec kProxyConnectionsSpec{64, 4194304};
// Below 16 KiB a window holds a few segments; above 64 MiB is beyond RFC 7323's largest
// useful window for any data-center path.
inline constexpr IntSpec kProxyBufferSpec{16384, 67108864};
inline constexpr IntSpec kProxyMemorySpec{1, 1048576};
// [hbone]: at least one connection; 2^20 connections of ~25 KiB are 25 GiB.
inline constexpr IntSpec kHboneConnectionsSpec{1, 1048576};
// Below 100 ms a handshake over any WAN fails; above 2 min a silent connect holds too long.
inline constexpr IntSpec kHboneHandshakeTimeoutSpec{100, 120000};
// At least one stream window (4 MiB): less would stall a single tunnel.
inline constexpr IntSpec kHboneMemorySpec{4, 1048576};
// health_check. Interval: below 100 ms probes cost the backends more than they tell; an hour
// is already a check that never notices. Timeout: at least 10 ms (a connect across a data
// center), and below the interval (checked apart). Rise and fall: 1 acts on every probe; 100
// probes at the longest interval would leave a dead backend in for days.
inline constexpr IntSpec kHealthIntervalSpec{100, 3600000};
inline constexpr IntSpec kHealthTimeoutSpec{10, 3600000};
inline constexpr IntSpec kHealthCountSpec{1, 100};
// A request target that fits one line of a small request, as nginx's client_header_buffer_size
// (1 KiB) takes it.
inline constexpr size_t kMaxHealthPathBytes = 1024;
// RFC 9293 §3.8.1: 2 MSL of 2 minutes at most; at least 1 s.
inline constexpr IntSpec kProxyTimeWaitSpec{1, 240};
// Access-log records per worker ring: below 64 a burst of closes between two control ticks
// drops records; 2^20 records are 448 MiB per worker.
inline constexpr IntSpec kAccessLogRingSpec{64, 1048576};
// session affinity: at least a second, at most Kubernetes' maximum (a day).
inline constexpr IntSpec kAffinityTimeoutSpec{1, kMaxAffinityTimeoutS};

using Keys = std::span<const std::string_view>;

// The valid keys at each place. Tables are listed with plain keys: TOML does not tell them apart
// by name, and a suggestion must be able to cross the two (`[[services]]` -> `service`).
inline constexpr std::string_view kRootKeys[] = {"gateway", "port",    "route",     "neighbor",
                                                 "service", "fullnat", "proxy",     "conntrack",
                                                 "mesh",    "hbone",   "control",   "admin",
                                                 "bgp",     "listener", "deny",
                                                 "access_log"};
inline constexpr std::string_view kGatewayKeys[] = {"workers", "locality", "drain_timeout_ms",
                                                    "watch_config"};
inline constexpr std::string_view kBgpKeys[] = {"local_as", "router_id", "hold_time_s",
                                                "withdraw_wait_ms", "daemon", "runtime_dir",
                                                "peer"};
inline constexpr std::string_view kBgpPeerKeys[] = {"address", "remote_as", "password"};
inline constexpr std::string_view kPortKeys[] = {
    "name", "device", "addresses", "mac", "rx_descriptors", "tx_descriptors", "mtu",
    "host_interface", "promiscuous"};
inline constexpr std::string_view kRouteKeys[] = {"prefix", "via", "port"};
inline constexpr std::string_view kNeighborKeys[] = {"address", "mac", "port"};
inline constexpr std::string_view kServiceKeys[] = {
    "name",     "vip",      "port",               "protocol",  "mode",          "table_size",
    "backend",  "gue_port", "on_backend_removal", "icmp_echo", "proxy_protocol",
    "deny",     "inspect_bytes",    "source_ranges",   "session_affinity", "affinity_timeout_s",
    "node_port", "health_check"};
inline constexpr std::string_view kHealthCheckKeys[] = {"type",       "port", "path", "interval_ms",
                                                        "timeout_ms", "rise", "fall"};
inline constexpr std::string_view kListenerKeys[] = {
    "name",       "vip",        "port",            "match", "route", "default_service",
    "peek_bytes", "peek_timeout_ms", "inspect_bytes", "deny"};
inline constexpr std::string_view kListenerRouteKeys[] = {"hostnames", "service", "port"};
inline constexpr std::string_view kDenyKeys[] = {"pattern"};
inline constexpr std::string_view kDenySourceKeys[] = {"source"};
inline constexpr std::string_view kBackendKeys[] = {"address", "port", "weight"};
inline constexpr std::string_view kFullnatKeys[] = {"local_addresses"};
inline constexpr std::string_view kProxyKeys[] = {"idle_timeout_s", "max_connections",
                                                  "buffer_bytes", "memory_mb", "time_wait_s"};
inline constexpr std::string_view kConntrackKeys[] = {
    "max_flows", "tcp_syn", "tcp_established", "tcp_fin", "tcp_time_wait", "udp", "icmp"};
inline constexpr std::string_view kMeshKeys[] = {
    "source",     "path",    "address", "tls",  "ca_file",   "token_file",
    "cluster_id", "node_id", "network", "mode", "table_size"};
inline constexpr std::string_view kHboneKeys[] = {
    "port",           "cert_chain",   "private_key",               "trust_bundle",
    "trust_domain",   "ca_address",   "ca_tls",                    "ca_file",
    "token_file",     "cluster_id",   "identity",                  "cert_ttl",
    "max_connections", "max_handshakes", "max_handshakes_per_source", "handshake_timeout_ms",
    "memory_mb"};
inline constexpr std::string_view kControlKeys[] = {"build_threads"};
inline constexpr std::string_view kAdminKeys[] = {"listen"};
inline constexpr std::string_view kAccessLogKeys[] = {"path", "flows", "ring_size"};

// Single tables, for the hint when one of their keys is written at the top level (usually
// because it was put above its [table] header).
inline constexpr std::pair<std::string_view, Keys> kSingleTables[] = {
    {"gateway", kGatewayKeys}, {"fullnat", kFullnatKeys}, {"proxy", kProxyKeys},
    {"conntrack", kConntrackKeys},
    {"mesh", kMeshKeys},       {"hbone", kHboneKeys},     {"control", kControlKeys},
    {"admin", kAdminKeys},     {"access_log", kAccessLogKeys}};

// ---- naming keys and values in messages (config_error.cc) ----

// "service[0]" + "port" -> "service[0].port"; "" + "port" -> "port".
std::string join(std::string_view path, std::string_view key);
// "service" + 1 -> "service[1]".
std::string indexed(std::string_view path, size_t i);
// "service[0].backend" -> "service.backend", as the table header is written.
std::string without_indices(std::string_view key);
// A string value as shown in messages: quoted, cut after 60 characters.
std::string quoted(std::string_view s);
// "file:line:col", or the file alone for positions without a line.
std::string where(const SourcePos& p);
// "a, b, c".
std::string list(Keys keys);
// "an integer lo..hi", or the spec's own wording.
std::string int_expected(const IntSpec& spec);
// "IPv4" or "IPv6".
std::string family(const IpAddr& a);
// File order, so the first error a reader meets is the first one in the file.

// ---- suggestions (config_suggest.cc) ----

// The closest candidate within two edits (one for words of up to four letters: two edits turn
// "sctp" into "tcp"), or "" when nothing is that close.
std::string closest(std::string_view got, std::span<const std::string_view> candidates);
// " (did you mean 'x'?)", or "" for no suggestion.
std::string did_you_mean(const std::string& suggestion);
// What follows "unknown key" / "unknown table" for `name` found in the table at `path` ("" is
// the top level) whose valid keys are `valid`: the nearest valid key, the table a top-level key
// belongs under, or the list of valid keys.
std::string unknown_key_hint(std::string_view name, std::string_view path, bool is_table,
                             Keys valid);

// ---- the validator (config_validate.cc) ----

// The validator's errors for `c`. `positions`: where each key was written; `failed`: keys the
// parser already reported (checks involving them are skipped: one mistake, one error).
std::vector<ConfigError> validate(const Config& c, const Positions& positions,
                                  const KeySet& failed);

}  // namespace meshgate::ctl::config_detail
