// The extra headers of an originated HBONE CONNECT (docs/HBONE.md "Client role").
// Control-rate helpers (once per new stream); any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dataplane/common/net_types.h"

namespace meshgate::dp::hbone {

// "<ip>:<port>" or "[<v6>]:<port>": the :authority of a CONNECT to an address.
std::string authority_of(const IpAddr& ip, uint16_t port);

// W3C baggage with the keys ztunnel sends, in its order; empty fields are omitted.
struct BaggageFields {
  std::string cluster_name;      // k8s.cluster.name
  std::string namespace_name;    // k8s.namespace.name
  std::string workload_kind;     // "deployment", "pod", ... → k8s.<kind>.name
  std::string workload_name;
  std::string service_name;      // service.name
  std::string service_version;   // service.version
  std::string region;            // cloud.region
  std::string zone;              // cloud.availability_zone
};
// Values outside the W3C baggage-octet set are percent-encoded.
std::string baggage_header(const BaggageFields& f);

// RFC 7239: for="<ip>:<port>" (IPv6 in brackets), plus ;host=<fqdn> when a service was
// targeted.
std::string forwarded_header(const IpAddr& src, uint16_t src_port, std::string_view service_host);

// W3C trace context: "00-<32 hex trace id>-<16 hex parent id>-00" from caller randomness. An
// all-zero id is invalid, so a zero half is replaced by 1.
std::string traceparent_header(uint64_t trace_hi, uint64_t trace_lo, uint64_t parent_id);

}  // namespace meshgate::dp::hbone
