// The access log's control side (control/accesslog/access_log_writer.h): one golden JSON line per
// record kind, the drain of every worker's ring into a file, reopening after a rename, the
// counters, and a filling disk (short writes, ENOSPC): whole lines only, a rate-limited log line.
#include "control/accesslog/access_log_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include "control/common/log.h"
#include "dataplane/snapshot/mode.h"
#include "tests/support/temp_dir.h"

namespace meshgate::ctl {
namespace {

using dp::AccessEnd;
using dp::AccessKind;
using dp::AccessRecord;

IpAddr ip(const char* s) { return *IpAddr::parse(s); }

// 2026-11-27T06:01:02.345Z
constexpr int64_t kStart = 1795759262345;

AccessRecord proxy_record() {
  AccessRecord r;
  r.start_unix_ms = kStart;
  r.duration_ms = 1520;
  r.worker = 1;
  r.kind = AccessKind::kProxy;
  r.end = AccessEnd::kClientFin;
  r.tuple.set(ip("192.0.2.10"), 40000, ip("203.0.113.20"), 80, ip("198.51.100.11"), 8080);
  r.bytes_from_client = 77;
  r.bytes_to_client = 1048576;
  dp::access_copy(r.names.service, "web");
  return r;
}

std::string line(const AccessRecord& r) { return access_record_json(r).dump(); }

TEST(AccessRecordJson, ProxyConnection) {
  EXPECT_EQ(line(proxy_record()),
            R"({"start":"2026-11-27T06:01:02.345Z","duration_ms":1520,"kind":"proxy",)"
            R"("client":"192.0.2.10:40000","vip":"203.0.113.20:80","backend":"198.51.100.11:8080",)"
            R"("service":"web","bytes_from_client":77,"bytes_to_client":1048576,)"
            R"("end":"client_fin","worker":1})");
}

TEST(AccessRecordJson, ListenerConnectionRejectedBeforeItsBackend) {
  AccessRecord r = proxy_record();
  r.kind = AccessKind::kListener;
  r.end = AccessEnd::kNoRoute;
  r.tuple.backend = IpAddr{};
  r.tuple.backend_port = 0;
  r.bytes_from_client = r.bytes_to_client = 0;
  r.names.service[0] = '\0';
  dp::access_copy(r.names.listener, "edge-tls");
  EXPECT_EQ(line(r),
            R"({"start":"2026-11-27T06:01:02.345Z","duration_ms":1520,"kind":"listener",)"
            R"("client":"192.0.2.10:40000","vip":"203.0.113.20:80","backend":"","service":"",)"
            R"("listener":"edge-tls","bytes_from_client":0,"bytes_to_client":0,)"
            R"("end":"no_route","worker":1})");
}

TEST(AccessRecordJson, HboneInboundCarriesBothPrincipals) {
  AccessRecord r = proxy_record();
  r.kind = AccessKind::kHboneInbound;
  r.end = AccessEnd::kBackendReset;
  r.tuple.set(ip("2001:db8::5"), 51000, ip("2001:db8::1"), 15008, ip("2001:db8:1::7"), 9080);
  dp::access_copy(r.src_identity, "spiffe://cluster.local/ns/default/sa/sleep");
  dp::access_copy(r.dst_identity, "spiffe://cluster.local/ns/istio-system/sa/meshgate");
  EXPECT_EQ(line(r),
            R"({"start":"2026-11-27T06:01:02.345Z","duration_ms":1520,"kind":"hbone_inbound",)"
            R"("client":"[2001:db8::5]:51000","vip":"[2001:db8::1]:15008",)"
            R"("backend":"[2001:db8:1::7]:9080","service":"web","bytes_from_client":77,)"
            R"("bytes_to_client":1048576,)"
            R"("source_principal":"spiffe://cluster.local/ns/default/sa/sleep",)"
            R"("destination_principal":"spiffe://cluster.local/ns/istio-system/sa/meshgate",)"
            R"("end":"backend_reset","worker":1})");
}

TEST(AccessRecordJson, HboneOutbound) {
  AccessRecord r = proxy_record();
  r.kind = AccessKind::kHboneOutbound;
  r.end = AccessEnd::kBackendRefused;
  dp::access_copy(r.src_identity, "spiffe://cluster.local/ns/istio-system/sa/meshgate");
  dp::access_copy(r.dst_identity, "spiffe://cluster.local/ns/default/sa/web");
  EXPECT_EQ(line(r),
            R"({"start":"2026-11-27T06:01:02.345Z","duration_ms":1520,"kind":"hbone_outbound",)"
            R"("client":"192.0.2.10:40000","vip":"203.0.113.20:80","backend":"198.51.100.11:8080",)"
            R"("service":"web","bytes_from_client":77,"bytes_to_client":1048576,)"
            R"("source_principal":"spiffe://cluster.local/ns/istio-system/sa/meshgate",)"
            R"("destination_principal":"spiffe://cluster.local/ns/default/sa/web",)"
            R"("end":"backend_refused","worker":1})");
}

TEST(AccessRecordJson, FlowShowsModeAndProtocolInsteadOfBytes) {
  AccessRecord r = proxy_record();
  r.kind = AccessKind::kFlow;
  r.end = AccessEnd::kIdleTimeout;
  r.mode = uint8_t(dp::Mode::kFullnat);
  r.proto = 17;
  EXPECT_EQ(line(r),
            R"({"start":"2026-11-27T06:01:02.345Z","duration_ms":1520,"kind":"flow",)"
            R"("client":"192.0.2.10:40000","vip":"203.0.113.20:80","backend":"198.51.100.11:8080",)"
            R"("service":"web","mode":"fullnat","protocol":"udp","end":"idle_timeout","worker":1})");
}

TEST(AccessRecordJson, LongNamesAreCutToTheirArrays) {
  AccessRecord r = proxy_record();
  dp::access_copy(r.names.service, std::string(200, 's'));
  EXPECT_EQ(std::string(r.names.service), std::string(dp::kAccessServiceLen - 1, 's'));
  // Bytes that are not UTF-8 (a name cut inside a character) are replaced, not an exception.
  r.names.service[0] = char(0xc3);
  r.names.service[1] = '\0';
  EXPECT_NE(access_record_json(r).dump(-1, ' ', false,
                                       nlohmann::ordered_json::error_handler_t::replace),
            "");
}

TEST(AccessRecordJson, Rfc3339Utc) {
  EXPECT_EQ(rfc3339_utc_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_utc_ms(kStart), "2026-11-27T06:01:02.345Z");
  EXPECT_EQ(rfc3339_utc_ms(1000 * 86400 + 7), "1970-01-02T00:00:00.007Z");
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

bool produce(dp::AccessRing* ring, uint64_t bytes) {
  dp::AccessRecord* r = ring->reserve();
  if (r == nullptr) return false;
  *r = proxy_record();
  r->bytes_from_client = bytes;
  ring->commit();
  return true;
}

TEST(AccessLogWriter, DrainsEveryWorkersRingIntoTheFileAndReopensAfterARename) {
  test::TempDir dir;
  const std::string path = dir.str() + "/access.log";
  AccessLogWriter w(2, 64);
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(produce(w.ring(0), 1));
  ASSERT_TRUE(produce(w.ring(1), 2));
  ASSERT_TRUE(produce(w.ring(0), 3));
  EXPECT_EQ(w.drain(), 3u);
  EXPECT_EQ(w.drain(), 0u);
  std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 3u);
  // Per worker in order: worker 0's two, then worker 1's.
  EXPECT_EQ(nlohmann::json::parse(l[0])["bytes_from_client"], 1);
  EXPECT_EQ(nlohmann::json::parse(l[1])["bytes_from_client"], 3);
  EXPECT_EQ(nlohmann::json::parse(l[2])["bytes_from_client"], 2);
  EXPECT_EQ(w.records(), 3u);

  // logrotate: the file is renamed, then SIGUSR1 reopens the path (a new file).
  const std::string rotated = path + ".1";
  ASSERT_EQ(std::rename(path.c_str(), rotated.c_str()), 0);
  ASSERT_TRUE(produce(w.ring(1), 4));
  w.drain();  // before the reopen: still the renamed file
  ASSERT_TRUE(w.reopen());
  ASSERT_TRUE(produce(w.ring(1), 5));
  w.drain();
  EXPECT_EQ(lines_of(rotated).size(), 4u);
  l = lines_of(path);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(l[0])["bytes_from_client"], 5);
  EXPECT_EQ(w.write_errors(), 0u);
}

TEST(AccessLogWriter, FullRingsAreCountedAsDropsSummedOverWorkers) {
  AccessLogWriter w(2, 64);
  int refused = 0;
  for (int i = 0; i < 70; ++i) refused += !produce(w.ring(0), 0);
  for (int i = 0; i < 65; ++i) refused += !produce(w.ring(1), 0);
  EXPECT_EQ(refused, 6 + 1);
  EXPECT_EQ(w.dropped(), 7u);
}

TEST(AccessLogWriter, OpenFailureKeepsThePreviousFile) {
  test::TempDir dir;
  const std::string path = dir.str() + "/a.log";
  AccessLogWriter w(1, 64);
  ASSERT_TRUE(w.open(path));
  auto r = w.open(dir.str() + "/missing/b.log");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing/b.log"), std::string::npos);
  EXPECT_EQ(w.path(), path);
  ASSERT_TRUE(produce(w.ring(0), 9));
  w.drain();
  EXPECT_EQ(lines_of(path).size(), 1u);
}

TEST(AccessLogWriter, WriteFailuresAreCountedAndTheRingsStillDrain) {
  AccessLogWriter w(1, 64);
  ASSERT_TRUE(w.open("/dev/full"));
  ASSERT_TRUE(produce(w.ring(0), 1));
  ASSERT_TRUE(produce(w.ring(0), 2));
  EXPECT_EQ(w.drain(), 2u);
  EXPECT_EQ(w.write_errors(), 2u);
  EXPECT_EQ(w.records(), 0u);
  EXPECT_EQ(w.ring(0)->size(), 0u);
}

// A disk that takes `room` more bytes: a write past it is cut short, a write with no room left
// fails with ENOSPC. What was written goes to `bytes`.
struct FakeDisk {
  std::string bytes;
  size_t room = SIZE_MAX;
  size_t calls = 0;
};
FakeDisk g_disk;

ssize_t fake_write(int, const void* buf, size_t n) {
  ++g_disk.calls;
  if (g_disk.room == 0) {
    errno = ENOSPC;
    return -1;
  }
  const size_t k = std::min(n, g_disk.room);
  g_disk.bytes.append(static_cast<const char*>(buf), k);
  g_disk.room -= k;
  return ssize_t(k);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

size_t unparseable(const std::vector<std::string>& lines) {
  size_t bad = 0;
  for (const auto& l : lines) bad += !nlohmann::json::accept(l);
  return bad;
}

TEST(AccessLogWriter, AShortWriteFinishesItsLineBeforeTheNextRecord) {
  g_disk = {};
  AccessLogWriter w(1, 64);
  w.set_write_fn(&fake_write);
  ASSERT_TRUE(w.open("/dev/null"));
  const size_t rec = line(proxy_record()).size() + 1;
  // Room for one and a half records: the second is cut, the last three find no room.
  g_disk.room = rec + rec / 2;
  for (uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE(produce(w.ring(0), i));
  EXPECT_EQ(w.drain(), 5u);
  // Space again: the second record's tail comes first, then the new records.
  g_disk.room = SIZE_MAX;
  for (uint64_t i = 6; i <= 8; ++i) ASSERT_TRUE(produce(w.ring(0), i));
  EXPECT_EQ(w.drain(), 3u);
  const std::vector<std::string> l = split_lines(g_disk.bytes);
  EXPECT_EQ(unparseable(l), 0u) << g_disk.bytes;
  ASSERT_EQ(l.size(), 5u) << g_disk.bytes;
  const uint64_t want[] = {1, 2, 6, 7, 8};
  for (size_t i = 0; i < l.size() && nlohmann::json::accept(l[i]); ++i) {
    EXPECT_EQ(nlohmann::json::parse(l[i])["bytes_from_client"], want[i]);
  }
  EXPECT_EQ(w.records(), 5u);
  EXPECT_EQ(w.write_errors(), 3u);
}

TEST(AccessLogWriter, AFillingDiskLeavesOnlyWholeLinesAndCountsEveryRecord) {
  g_disk = {};
  AccessLogWriter w(2, 64);
  w.set_write_fn(&fake_write);
  ASSERT_TRUE(w.open("/dev/null"));
  std::mt19937 rng(7);
  uint64_t produced = 0;
  for (int round = 0; round < 300; ++round) {
    // Mostly a trickle of room (a nearly full disk), now and then none or plenty.
    const uint32_t pick = rng() % 10;
    g_disk.room = pick == 0 ? 0 : pick == 1 ? SIZE_MAX : rng() % 700;
    const uint32_t n = rng() % 5;
    for (uint32_t i = 0; i < n; ++i) produced += produce(w.ring(i % 2), produced + 1);
    w.drain();
  }
  g_disk.room = SIZE_MAX;
  ASSERT_TRUE(produce(w.ring(0), 0));  // the last record goes out and pushes any tail first
  ++produced;
  w.drain();
  const std::vector<std::string> l = split_lines(g_disk.bytes);
  EXPECT_EQ(unparseable(l), 0u);
  EXPECT_EQ(g_disk.bytes.back(), '\n');
  EXPECT_EQ(w.records(), l.size());
  EXPECT_EQ(w.records() + w.write_errors(), produced);
  EXPECT_GT(w.write_errors(), 0u);
  std::printf("%zu lines, %zu unparseable, %lu lost of %lu\n", l.size(), unparseable(l),
              (unsigned long)w.write_errors(), (unsigned long)produced);
}

TEST(AccessLogWriter, ARealFileSizeLimitCutsAWriteShortAndTheLinesStayWhole) {
  // RLIMIT_FSIZE makes the kernel cut a write at the limit and fail the next with EFBIG, as a
  // filling disk does with ENOSPC, on a real file and without root.
  test::TempDir dir;
  const std::string path = dir.str() + "/access.log";
  AccessLogWriter w(1, 64);
  ASSERT_TRUE(w.open(path));
  const size_t rec = line(proxy_record()).size() + 1;
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit lim = old;
  lim.rlim_cur = rlim_t(rec * 2 + rec / 3);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  for (uint64_t i = 1; i <= 6; ++i) ASSERT_TRUE(produce(w.ring(0), i));
  testing::internal::CaptureStderr();
  w.drain();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("event=access_log_write_failed "), std::string::npos) << err;
  EXPECT_NE(err.find(" error=\"File too large\" dropped=3 "), std::string::npos) << err;
  for (uint64_t i = 7; i <= 8; ++i) ASSERT_TRUE(produce(w.ring(0), i));
  w.drain();
  const std::vector<std::string> l = lines_of(path);
  EXPECT_EQ(unparseable(l), 0u);
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(nlohmann::json::parse(l[2])["bytes_from_client"], 3);
  EXPECT_EQ(nlohmann::json::parse(l[3])["bytes_from_client"], 7);
  EXPECT_EQ(w.records(), 5u);
  EXPECT_EQ(w.write_errors(), 3u);
}

TEST(AccessLogWriter, WriteFailuresAreLoggedAtMostOncePerInterval) {
  g_disk = {};
  g_disk.room = 0;
  AccessLogWriter w(1, 64);
  w.set_write_fn(&fake_write);
  w.set_failure_log_interval(std::chrono::milliseconds(300));
  ASSERT_TRUE(w.open("/dev/null"));
  testing::internal::CaptureStderr();
  for (uint64_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(produce(w.ring(0), i));
    w.drain();
  }
  const std::vector<std::string> first = split_lines(testing::internal::GetCapturedStderr());
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NE(first[0].find("event=access_log_write_failed "), std::string::npos) << first[0];
  EXPECT_NE(first[0].find(" error=\"No space left on device\""), std::string::npos) << first[0];
  EXPECT_NE(first[0].find(" dropped=1 "), std::string::npos) << first[0];
  // After the interval the next drain says how many were lost since, even with nothing new.
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  testing::internal::CaptureStderr();
  w.drain();
  ASSERT_TRUE(produce(w.ring(0), 99));
  w.drain();  // within the interval again: counted, not logged
  const std::vector<std::string> second = split_lines(testing::internal::GetCapturedStderr());
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].find(" dropped=49 total=50"), std::string::npos) << second[0];
  EXPECT_EQ(w.write_errors(), 51u);
}

TEST(AccessLogWriter, StatsJsonHasTheCounters) {
  AccessLogWriter w(1, 64);
  ASSERT_TRUE(w.open("/dev/full"));
  ASSERT_TRUE(produce(w.ring(0), 1));
  w.drain();
  const nlohmann::json j = w.stats_json();
  EXPECT_EQ(j["path"], "/dev/full");
  EXPECT_EQ(j["records"], 0);
  EXPECT_EQ(j["dropped"], 0);
  EXPECT_EQ(j["write_errors"], 1);
}

}  // namespace
}  // namespace meshgate::ctl
