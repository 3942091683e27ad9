// meshgate configuration: TOML (toml++) parsed once into these plain structs, validated in one
// function. Control thread only. Keys and meanings:
// config/README.md. Every default is a named constant with its reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/common/result.h"
#include "dataplane/common/limits.h"
#include "dataplane/common/net_types.h"
#include "dataplane/snapshot/mode.h"

namespace meshgate::ctl {

// Where a value came from, for error messages and dumps.
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
};

// One validation or syntax error: "file:line:column: key: message".
struct ConfigError {
  SourcePos pos;
  std::string key;      // dotted path with indices, e.g. "service[1].backend[0].port"
  std::string message;  // what was expected / what is wrong
  std::string str() const;
};

// An unknown key as an error echoes it: a key written by mistake (or by a fuzzer) can be
// megabytes long, and the message must stay one readable line, so it is cut to its first
// kMaxEchoedKey bytes and an ellipsis.
inline constexpr size_t kMaxEchoedKey = 64;
std::string echoed_key(std::string_view key);

struct ConfigErrors {
  std::vector<ConfigError> errors;
  std::string str() const;  // one error per line
};
// Orders errors as they stand in their file (line, then column), keeping the order of equals.
void sort_by_position(std::vector<ConfigError>& errors);

// Defaults.
inline constexpr uint32_t kDefaultWorkers = 1;
// The dataplane's array sizes (dataplane/common/limits.h): one definition for the validator,
// the command line and the arrays themselves.
inline constexpr uint32_t kMaxWorkers = dp::kMaxWorkers;
inline constexpr uint32_t kMaxPorts = dp::kMaxPorts;
inline constexpr uint16_t kDefaultRxDescriptors = 1024;  // absorbs ~50 us at 20 Mpps
inline constexpr uint16_t kDefaultTxDescriptors = 1024;
inline constexpr uint16_t kDefaultMtu = 1500;            // Ethernet default
inline constexpr uint32_t kDefaultMaxFlows = 1u << 20;   // config/README.md [conntrack]
// Conntrack timeouts in seconds, chosen like Linux nf_conntrack / IPVS defaults.
inline constexpr uint32_t kDefaultTcpSynS = 30;
inline constexpr uint32_t kDefaultTcpEstablishedS = 7200;
inline constexpr uint32_t kDefaultTcpFinS = 60;
inline constexpr uint32_t kDefaultTcpTimeWaitS = 60;
inline constexpr uint32_t kDefaultUdpS = 60;
inline constexpr uint32_t kDefaultIcmpS = 30;
inline constexpr uint16_t kDefaultHbonePort = 15008;  // Istio HBONE
// [hbone] limits, per worker (docs/HBONE.md "Abuse"). Connections: each holds a TLS session
// and HTTP/2 state (~25 KiB idle).
inline constexpr uint32_t kDefaultHboneMaxConnections = 4096;
// Connections still in their TLS handshake or before the client's HTTP/2 SETTINGS: a quarter
// of the connection limit, so silent connects never hold the slots of established tunnels.
inline constexpr uint32_t kDefaultHboneMaxHandshakes = 1024;
// Handshaking connections of one client address: a ztunnel opens one connection per
// destination pod and identity, a few at once; 32 leaves room for a node's worth of bursts.
inline constexpr uint32_t kDefaultHboneMaxHandshakesPerSource = 32;
// A full mutual TLS 1.3 handshake takes a few round trips and ~2 ms of CPU: 5 s is long even
// over a lossy WAN, and bounds how long a silent connect holds a slot.
inline constexpr uint32_t kDefaultHboneHandshakeTimeoutMs = 5000;
// All HBONE buffers of one worker (queued toward clients, received and not yet passed
// upstream): 16 connections with full 16 MiB windows; past it windows close.
inline constexpr uint32_t kDefaultHboneMemoryMb = 256;
// GUE's destination port: the one Linux fou/gue examples and most deployments use.
inline constexpr uint16_t kDefaultGuePort = 6080;
// Drain on SIGTERM / POST /drain: long enough for short requests to finish, well inside
// Kubernetes' default 30 s terminationGracePeriodSeconds so a rolling restart stays quick.
inline constexpr uint32_t kDefaultDrainTimeoutMs = 5000;
inline constexpr uint32_t kMaxDrainTimeoutMs = 600000;  // 10 min: beyond it, use SIGINT

// A service's forwarding mode: the dataplane's own enum, with its name table
// (dataplane/snapshot/mode.h), so the config, its messages and every output share one spelling.
using ForwardMode = dp::Mode;

// mode = "proxy": what goes first on the connection to the backend. v2 is the binary PROXY
// protocol header (HAProxy's spec, section 2.2) with the client's address and the VIP.
enum class ProxyProtocol : uint8_t { kNone, kV2 };

// [proxy]: the userspace L4 proxy of mode = "proxy", per worker.
// Envoy's TCP proxy idle_timeout default: long enough for idle database and gRPC connections.
inline constexpr uint32_t kDefaultProxyIdleTimeoutS = 3600;
// TCBs per worker (client and backend sides, TIME-WAIT included), 976 bytes each: 16 MiB.
// Every closed session leaves one TIME-WAIT TCB for time_wait_s; a full table frees the
// oldest TIME-WAIT early rather than refuse a client.
inline constexpr uint32_t kDefaultProxyMaxConnections = 16384;
// Send and receive buffer of each connection: a 2 Gbit/s x 1 ms data-center BDP (docs/TCP.md).
inline constexpr uint32_t kDefaultProxyBufferBytes = 256 * 1024;
// All buffers of one worker: 64 connections with both buffers of both sides full; beyond it
// windows shrink (a slow consumer closes its writer's window, nothing is buffered unbounded).
inline constexpr uint32_t kDefaultProxyMemoryMb = 64;
// Linux's TIME-WAIT length (docs/TCP.md explains why not 2 x 2 minutes).
inline constexpr uint32_t kDefaultProxyTimeWaitS = 60;
// True when the workers run the TCP stack for the proxy: some service (or the mesh's mode) uses
// mode = "proxy", or a [[listener]] is configured.
struct Config;
bool uses_proxy(const Config& c);
// [hbone] has a certificate source (files or the Istio CA): the workers terminate HBONE on the
// [hbone] port (on the TCP stack the proxy uses, which they then run even without proxy VIPs).
bool uses_hbone(const Config& c);

// What happens to the flows of a backend that leaves the service: they keep going until they
// end (kube-proxy / IPVS default), or the next packet of each is dropped and the flow removed,
// so the client's retransmission reaches a live backend that resets it.
enum class BackendRemoval : uint8_t { kKeep, kReset };

// ICMP echo requests to the VIP: answered by the gateway (IPVS / a kube-proxy IPVS node does
// that), or forwarded to a backend like any flow (the echo identifier plays the port), so a
// ping through the VIP reaches a backend and its reply comes back translated.
enum class IcmpEcho : uint8_t { kAnswer, kForward };

// Where something runs, as Kubernetes topology labels say it: region / zone / subzone. Empty
// parts are unknown. Compared part by part with mesh workloads' localities (load_balancing).
struct Locality {
  std::string region;
  std::string zone;
  std::string subzone;
  // "region/zone/subzone" (trailing parts may be left out); nullopt with more than three parts.
  static std::optional<Locality> parse(std::string_view s);
  std::string str() const;
  friend bool operator==(const Locality&, const Locality&) = default;
};

struct GatewayConfig {
  uint32_t workers = kDefaultWorkers;  // worker lcores; each owns one RX/TX queue per port
  Locality locality;  // this gateway's locality, for mesh services' STRICT / FAILOVER modes
  // Milliseconds SIGTERM / POST /drain waits for established TCP flows to close (new flows are
  // refused meanwhile) before the workers stop; 0 stops at once.
  uint32_t drain_timeout_ms = kDefaultDrainTimeoutMs;
  // Reload the config when its file changes (as SIGHUP does; config/README.md "Reloading").
  // Off by default: an editor's half-written save would be tried (and refused) as a reload.
  bool watch_config = false;
  SourcePos pos;
};

struct PortConfig {
  std::string name;
  std::string device;                 // PCI address ("0000:3b:00.1") or DPDK vdev string
  std::vector<IpPrefix> addresses;    // local addresses with their on-link prefix
  std::optional<MacAddr> mac;         // override of the device MAC
  uint16_t rx_descriptors = kDefaultRxDescriptors;
  uint16_t tx_descriptors = kDefaultTxDescriptors;
  uint16_t mtu = kDefaultMtu;         // bytes of IP packet
  // The port's kernel twin (a TAP interface of that name): traffic to the port's addresses
  // that the gateway does not serve itself, and what the kernel sends out through the port.
  // Empty: none.
  std::string host_interface;
  // Take unicast frames to any MAC, not only the port's own (the NIC in promiscuous mode, the
  // L2 check off): a capture made elsewhere, whose frames are addressed to another host's MAC,
  // is processed as if sent to this port. Off by default: on a shared segment it would make
  // the gateway forward traffic meant for its neighbours.
  bool promiscuous = false;
  SourcePos pos;
};

struct RouteConfig {
  IpPrefix prefix;
  IpAddr via;        // next hop; must be on-link of a port address (or of `port`)
  std::string port;  // optional: port name; empty = the port whose prefix holds `via`
  SourcePos pos;
};

struct NeighborConfig {
  IpAddr address;
  MacAddr mac;
  std::string port;  // optional: empty = the port whose prefix holds `address`
  SourcePos pos;
};

struct BackendConfig {
  IpAddr address;
  uint16_t port = 0;    // required
  uint32_t weight = 1;  // 0 = drain: no new flows, existing flows stay
  SourcePos pos;
};

// [[listener]]: a VIP:port terminated on the workers' TCP stack whose connections are routed by
// the name they carry (docs/NAMES.md): the TLS ClientHello's server_name or the HTTP/1.x Host.
enum class NameMatch : uint8_t { kSni, kHost };
// The first bytes read to find the name: a ClientHello with post-quantum key shares and many
// extensions is 2-3 KiB, large HTTP request headers (cookies) reach 8 KiB; 16 KiB is one TLS
// record and nginx's default large_client_header_buffers size.
inline constexpr uint32_t kDefaultPeekBytes = 16384;
// A client that sends nothing (or too little) holds a connection this long at most: HAProxy's
// `tcp-request inspect-delay` examples use 5 s.
inline constexpr uint32_t kDefaultPeekTimeoutMs = 5000;
// Deny signatures look at the client's first bytes only: a request line, headers and a small
// body, where exploits and scanners show themselves; the rest of a stream goes uninspected.
inline constexpr uint32_t kDefaultInspectBytes = 65536;

struct ListenerRouteConfig {
  // "shop.example.com", "*.example.com" (one or more labels), "~REGEX" (the whole name).
  std::vector<std::string> hostnames;
  // A [[service]] name, or a mesh service hostname ("reviews.ns.svc.cluster.local").
  std::string service;
  // The mesh service's port; 0 = the listener's port. (A [[service]] brings its own.)
  uint16_t port = 0;
  SourcePos pos;
};

struct DenyConfig {
  std::string pattern;  // a regular expression (Hyperscan syntax) over the client's bytes
  SourcePos pos;
};

struct ListenerConfig {
  std::string name;
  IpAddr vip;
  uint16_t port = 0;
  NameMatch match = NameMatch::kSni;
  std::vector<ListenerRouteConfig> routes;
  // For no name / no match (a mesh service at the listener's port); empty = reset those.
  std::string default_service;
  uint32_t peek_bytes = kDefaultPeekBytes;            // bytes read at most to find the name
  uint32_t peek_timeout_ms = kDefaultPeekTimeoutMs;   // ms to wait for them
  uint32_t inspect_bytes = kDefaultInspectBytes;      // client bytes the deny signatures see
  std::vector<DenyConfig> deny;
  SourcePos pos;
};

// health_check of a [[service]]: each backend is probed from a port address through that
// port's kernel twin (docs/DATAPLANE.md "Backend health checks"). The timing defaults are
// HAProxy's server check defaults (inter 2s, rise 2, fall 3), which keepalived and DPVS
// setups mostly copy: a dead backend is out after ~6 s, a recovered one back after ~4 s, and
// a single lost probe never flaps a backend.
enum class HealthCheckType : uint8_t { kTcp, kHttp };
inline constexpr uint32_t kDefaultHealthIntervalMs = 2000;
// Kubernetes' probe timeoutSeconds default: a backend on the same L2 segment answers a connect
// in well under a millisecond, so a second is already a sick backend; it also leaves half the
// interval so probes of one backend never overlap.
inline constexpr uint32_t kDefaultHealthTimeoutMs = 1000;
inline constexpr uint32_t kDefaultHealthRise = 2;  // successes in a row to come back
inline constexpr uint32_t kDefaultHealthFall = 3;  // failures in a row to be taken out
inline constexpr const char* kDefaultHealthPath = "/";

struct HealthCheckConfig {
  bool enabled = false;  // the service has a health_check table
  HealthCheckType type = HealthCheckType::kTcp;
  uint16_t port = 0;                      // probed port; 0 = each backend's own port
  std::string path = kDefaultHealthPath;  // http: the request target of the GET
  uint32_t interval_ms = kDefaultHealthIntervalMs;  // ms between probes of one backend
  uint32_t timeout_ms = kDefaultHealthTimeoutMs;    // ms a probe may take; < interval_ms
  uint32_t rise = kDefaultHealthRise;  // consecutive successes that bring a down backend up
  uint32_t fall = kDefaultHealthFall;  // consecutive failures that take an up backend down
  SourcePos pos;
};
// session_affinity: kClientIp keeps every connection of a client address on one backend
// (Kubernetes' sessionAffinity: ClientIP).
enum class SessionAffinity : uint8_t { kNone, kClientIp };
// Kubernetes' sessionAffinityConfig.clientIP.timeoutSeconds default (3 hours) and maximum (1 day).
inline constexpr uint32_t kDefaultAffinityTimeoutS = 10800;
inline constexpr uint32_t kMaxAffinityTimeoutS = 86400;

struct ServiceConfig {
  std::string name;
  IpAddr vip;
  uint16_t port = 0;
  L4Proto protocol = L4Proto::kTcp;
  ForwardMode mode = ForwardMode::kDnat;
  uint32_t table_size = 0;  // lookup table slots (prime); 0 = automatic (>= 100 x backends)
  BackendRemoval on_backend_removal = BackendRemoval::kKeep;
  uint16_t gue_port = kDefaultGuePort;  // dsr-gue: outer UDP destination port
  IcmpEcho icmp_echo = IcmpEcho::kAnswer;
  ProxyProtocol proxy_protocol = ProxyProtocol::kNone;  // proxy: header toward backends
  std::vector<BackendConfig> backends;
  // proxy: signatures over the client's first inspect_bytes; a match resets both sides.
  std::vector<DenyConfig> deny;
  uint32_t inspect_bytes = kDefaultInspectBytes;
  HealthCheckConfig health_check;
  // New flows only from these prefixes (Kubernetes loadBalancerSourceRanges); empty = anyone.
  std::vector<IpPrefix> source_ranges;
  SessionAffinity session_affinity = SessionAffinity::kNone;
  uint32_t affinity_timeout_s = kDefaultAffinityTimeoutS;  // seconds after the last connection
  // Also reachable at every port address of the VIP's family at this port (kube-proxy
  // NodePort); 0 = not.
  uint16_t node_port = 0;
  SourcePos pos;
};

struct FullnatConfig {
  std::vector<IpAddr> local_addresses;
  SourcePos pos;
};

struct ProxyConfig {
  uint32_t idle_timeout_s = kDefaultProxyIdleTimeoutS;  // seconds without data; 0 = none
  uint32_t max_connections = kDefaultProxyMaxConnections;  // per worker
  uint32_t buffer_bytes = kDefaultProxyBufferBytes;  // per connection and direction
  uint32_t memory_mb = kDefaultProxyMemoryMb;        // MiB of buffers per worker
  uint32_t time_wait_s = kDefaultProxyTimeWaitS;     // seconds
  SourcePos pos;
};

struct ConntrackConfig {
  uint32_t max_flows = kDefaultMaxFlows;  // per gateway; split across workers
  uint32_t tcp_syn = kDefaultTcpSynS;     // seconds, each
  uint32_t tcp_established = kDefaultTcpEstablishedS;
  uint32_t tcp_fin = kDefaultTcpFinS;
  uint32_t tcp_time_wait = kDefaultTcpTimeWaitS;
  uint32_t udp = kDefaultUdpS;
  uint32_t icmp = kDefaultIcmpS;
  SourcePos pos;
};

enum class MeshSource : uint8_t { kNone, kFile, kXds };

struct MeshConfig {
  MeshSource source = MeshSource::kNone;
  std::string path;        // file: mesh file, reloaded on change
  std::string address;     // xds: "istiod.istio-system.svc:15012"
  bool tls = true;         // xds: TLS with server authentication (plaintext for tests)
  std::string ca_file;     // xds: CA bundle verifying istiod
  std::string token_file;  // xds: bearer token (path)
  std::string cluster_id = "Kubernetes";  // Istio's default CLUSTER_ID
  std::string node_id;
  std::string network;
  ForwardMode mode = ForwardMode::kDnat;  // for non-mesh endpoints: dnat | fullnat | proxy
  // Maglev slots of every mesh service (a prime); 0 = automatic per service, by its endpoint
  // count (mesh::mesh_table_size: 1009 up to 10 endpoints, doubling bands above).
  uint32_t table_size = 0;
  SourcePos pos;
};

struct HboneConfig {
  uint16_t port = kDefaultHbonePort;
  std::string cert_chain;
  std::string private_key;
  std::string trust_bundle;
  std::string trust_domain = "cluster.local";
  // Certificates from the Istio CA (CreateCertificate) instead of cert_chain / private_key when
  // ca_address is set; ca_tls / ca_file / token_file / cluster_id default to [mesh]'s.
  std::string ca_address;
  std::optional<bool> ca_tls;
  std::string ca_file;
  std::string token_file;
  std::string cluster_id;
  std::string identity;          // the SPIFFE id requested ("spiffe://td/ns/x/sa/y")
  uint32_t cert_ttl = 86400;     // seconds requested (SECRET_TTL); renewed at half-life
  uint32_t max_connections = kDefaultHboneMaxConnections;  // per worker
  uint32_t max_handshakes = kDefaultHboneMaxHandshakes;    // per worker, handshaking
  uint32_t max_handshakes_per_source = kDefaultHboneMaxHandshakesPerSource;  // per worker
  uint32_t handshake_timeout_ms = kDefaultHboneHandshakeTimeoutMs;
  uint32_t memory_mb = kDefaultHboneMemoryMb;  // MiB of HBONE buffers per worker
  SourcePos pos;
};

// [control]: the control thread's own resources.
// Threads filling a snapshot build's Maglev tables, the control thread included. 0 = automatic
// (resolve_build_threads): the cores the workers leave, as the helpers run there.
inline constexpr uint32_t kDefaultBuildThreads = 0;
// Automatic never takes more than 8: past that the fill is no longer most of a build of
// 10,000 services (docs/PERFORMANCE.md, control plane), while every helper is a thread to wake.
inline constexpr uint32_t kMaxAutoBuildThreads = 8;
// A set value is bounded: a host with more cores than that for the control plane is not
// expected. Helper threads are a vector, not a fixed array, so this is not a dataplane limit.
inline constexpr uint32_t kMaxBuildThreads = 64;

struct ControlConfig {
  uint32_t build_threads = kDefaultBuildThreads;  // threads; 0 = automatic; 1 = serial builds
  SourcePos pos;
};

// The thread count of snapshot builds: `configured` when set, else the CPUs left after the
// workers (`cpus` - `workers`), at least 1 and at most kMaxAutoBuildThreads.
uint32_t resolve_build_threads(uint32_t configured, uint32_t workers, uint32_t cpus);

struct AdminConfig {
  std::string listen = "127.0.0.1:15000";  // host:port; empty string disables the admin API
  SourcePos pos;
};

// [access_log]: one JSON line per connection at its end (docs/CONTROL.md "Access log").
// Records per worker ring: a record is 448 bytes, so 4096 are 1.75 MiB per worker, and a
// worker would have to end more than 4000 connections within one control-loop tick (1 ms) to
// fill it.
inline constexpr uint32_t kDefaultAccessLogRingSize = 4096;

struct AccessLogConfig {
  std::string path;  // a file (appended to, reopened on SIGUSR1), "-" for stdout; "" = off
  bool flows = false;  // also a flow-end record per packet-mode flow (dnat, fullnat, dsr)
  uint32_t ring_size = kDefaultAccessLogRingSize;  // records per worker
  SourcePos pos;
};

// [bgp]: the VIPs announced to the routers through an existing BGP daemon (BIRD 2) that meshgate
// runs and supervises (control/bgp/bgp_speaker.h).
inline constexpr uint32_t kDefaultBgpHoldTimeS = 9;
inline constexpr uint32_t kDefaultWithdrawWaitMs = 2000;
// The longest TCP MD5 key Linux takes (TCP_MD5SIG_MAXKEYLEN); BIRD refuses a longer password when
// it opens the session's socket, so the session would stay down.
inline constexpr size_t kMaxBgpPasswordBytes = 80;
// The daemon's control socket is <runtime_dir>/bgp.<pid>/bird.ctl and must fit sockaddr_un's
// sun_path (108 bytes with its NUL): 107 - "/bgp." - 7 pid digits (PID_MAX_LIMIT is 2^22) -
// "/bird.ctl". The speaker checks its socket name against this (bgp_speaker.cc).
inline constexpr size_t kMaxBgpRuntimeDirBytes = 86;

struct BgpPeerConfig {
  IpAddr address;          // on-link of a port with a host_interface
  uint32_t remote_as = 0;
  std::string password;    // TCP MD5 (RFC 2385); empty: none
  SourcePos pos;
};

struct BgpConfig {
  bool enabled = false;  // the table is present
  uint32_t local_as = 0;
  std::optional<IpAddr> router_id;  // IPv4; default: the first IPv4 port address
  uint32_t hold_time_s = kDefaultBgpHoldTimeS;
  // A drain withdraws every VIP, waits this long (the routers move new flows away), then refuses
  // new flows.
  uint32_t withdraw_wait_ms = kDefaultWithdrawWaitMs;
  std::string daemon = "/usr/sbin/bird";
  // Where the daemon's generated config and control socket live (a directory of this process's
  // own is made in it and removed at exit). Empty: $RUNTIME_DIRECTORY, else /run/meshgate.
  std::string runtime_dir;
  std::vector<BgpPeerConfig> peers;
  SourcePos pos;
};

struct Config {
  std::string path;  // the file this came from
  // SHA-256 of the bytes parsed, lowercase hex (load_config); empty for text parsed in code.
  std::string sha256;
  // Where each key was written ("hbone.cert_chain" -> file:line:column), for errors found after
  // parsing (the files and devices the config names). Empty for configs built in code.
  std::map<std::string, SourcePos, std::less<>> positions;
  GatewayConfig gateway;
  std::vector<PortConfig> ports;
  std::vector<RouteConfig> routes;
  std::vector<NeighborConfig> neighbors;
  std::vector<ServiceConfig> services;
  std::vector<ListenerConfig> listeners;
  // [[deny]] source = "prefix": the gateway-wide block list; every packet from these sources
  // is dropped (source_blocked).
  std::vector<IpPrefix> deny_sources;
  FullnatConfig fullnat;
  ProxyConfig proxy;
  ConntrackConfig conntrack;
  MeshConfig mesh;
  HboneConfig hbone;
  ControlConfig control;
  AdminConfig admin;
  BgpConfig bgp;
  AccessLogConfig access_log;
};

// Parses and validates. On failure returns every error found (syntax errors stop at the first).
// `name` is used as the file name in messages.
Result<Config, ConfigErrors> parse_config(std::string_view toml_text, const std::string& name);
Result<Config, ConfigErrors> load_config(const std::string& path);

// What parse_config / load_config found, and what parsed even when something did not: --check
// runs the checks of what a config points at (its files, its devices) on the keys that parsed,
// so every independent mistake is reported in one pass (an unknown key does not hide a bad
// device). `config` is nullopt when the file could not be read or is not TOML; otherwise it
// holds every value that parsed (defaults or placeholders where one did not: the keys in
// `errors`) and `positions`.
struct ConfigCheck {
  std::optional<Config> config;
  ConfigErrors errors;
};
ConfigCheck check_config(std::string_view toml_text, const std::string& name);
ConfigCheck check_config_file(const std::string& path);

// Where `key` was written, else where its nearest enclosing key or table was, else the file.
SourcePos position_of(const Config& config, std::string_view key);

// Validation alone (parse_config already calls it); exposed for configs built in code.
ConfigErrors validate_config(const Config& config);

// What is valid but cannot work as written (config_warnings.cc): a backend address no port
// prefix and no [[route]] covers. Each at its key's position; none stops a start.
std::vector<ConfigError> config_warnings(const Config& config);

}  // namespace meshgate::ctl
