#include "dataplane/hbone/headers.h"

#include <cstdio>

namespace meshgate::dp::hbone {
namespace {

// W3C baggage: baggage-octet = %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E
bool baggage_octet(unsigned char c) {
  return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) ||
         (c >= 0x3C && c <= 0x5B) || (c >= 0x5D && c <= 0x7E);
}

void add(std::string& out, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  if (!out.empty()) out += ',';
  out += key;
  out += '=';
  for (unsigned char c : value) {
    if (baggage_octet(c) && c != '%') {
      out += char(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
}

}  // namespace

std::string authority_of(const IpAddr& ip, uint16_t port) {
  const std::string host = ip.is_v4() ? ip.str() : "[" + ip.str() + "]";
  return host + ":" + std::to_string(port);
}

std::string baggage_header(const BaggageFields& f) {
  std::string out;
  add(out, "k8s.cluster.name", f.cluster_name);
  add(out, "k8s.namespace.name", f.namespace_name);
  if (!f.workload_kind.empty()) add(out, "k8s." + f.workload_kind + ".name", f.workload_name);
  add(out, "service.name", f.service_name);
  add(out, "service.version", f.service_version);
  add(out, "cloud.region", f.region);
  add(out, "cloud.availability_zone", f.zone);
  return out;
}

std::string forwarded_header(const IpAddr& src, uint16_t src_port, std::string_view service_host) {
  std::string out = "for=\"" + authority_of(src, src_port) + "\"";
  if (!service_host.empty()) {
    out += ";host=";
    out += service_host;
  }
  return out;
}

std::string traceparent_header(uint64_t trace_hi, uint64_t trace_lo, uint64_t parent_id) {
  if ((trace_hi | trace_lo) == 0) trace_lo = 1;
  if (parent_id == 0) parent_id = 1;
  char buf[64];
  std::snprintf(buf, sizeof buf, "00-%016llx%016llx-%016llx-00", (unsigned long long)trace_hi,
                (unsigned long long)trace_lo, (unsigned long long)parent_id);
  return buf;
}

}  // namespace meshgate::dp::hbone
