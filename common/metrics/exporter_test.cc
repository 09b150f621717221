#include "common/metrics/exporter.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/build_info.h"
#include "common/metrics/families.h"
#include "common/metrics/testing/http_get.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ExporterTest, ServesTheSourceProcessMetricsAndBuildInfo) {
  int scrapes = 0;
  auto exporter = Exporter::Start("127.0.0.1", 0, "worker", [&scrapes] {
    ++scrapes;
    return std::vector<prometheus::MetricFamily>{
        Gauge("pscluster_test_value", "A value.", 42, {{"task", "worker:0"}})};
  });
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);
  const std::string text = HttpGet((*exporter)->port(), "/metrics");
  EXPECT_THAT(text, HasSubstr("200 OK"));
  EXPECT_THAT(text, HasSubstr("pscluster_test_value{task=\"worker:0\"} 42"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes "));
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds "));
  EXPECT_THAT(text, HasSubstr("process_open_fds "));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("pscluster_build_info{version=\"", base::Version(),
                                           "\",git_commit=\"", base::GitCommit(),
                                           "\",role=\"worker\"} 1")));
  EXPECT_EQ(scrapes, 1);
}

TEST(ExporterTest, ProcessMetricsAreThisProcesses) {
  auto exporter =
      Exporter::Start("127.0.0.1", 0, "ps", [] { return std::vector<prometheus::MetricFamily>{}; });
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const std::string text = HttpGet((*exporter)->port(), "/metrics");
  // The resident memory of a running test binary is above 1 MB.
  const size_t at = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(at, std::string::npos) << text;
  const double rss = std::stod(text.substr(at + 31));
  EXPECT_GT(rss, 1e6);
  EXPECT_THAT(text, Not(HasSubstr("nan")));
}

TEST(ExporterTest, ABusyPortIsUnavailable) {
  auto empty = [] { return std::vector<prometheus::MetricFamily>{}; };
  auto first = Exporter::Start("127.0.0.1", 0, "ps", empty);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Exporter::Start("127.0.0.1", (*first)->port(), "chief", empty);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("Address already in use"));
}

TEST(ExporterTest, RoutesOnlyGetAndHeadOfMetrics) {
  EXPECT_EQ(RouteRequest("GET", "/metrics").status, 200);
  EXPECT_EQ(RouteRequest("HEAD", "/metrics").status, 200);
  EXPECT_THAT(RouteRequest("GET", "/metrics").content_type,
              ::testing::StartsWith("text/plain; version=0.0.4"));
  EXPECT_EQ(RouteRequest("GET", "/").status, 404);
  EXPECT_EQ(RouteRequest("GET", "/metrics/x").status, 404);
  EXPECT_EQ(RouteRequest("POST", "/metrics").status, 405);
}

std::unique_ptr<Exporter> StartGauge() {
  auto exporter = Exporter::Start("127.0.0.1", 0, "ps", [] {
    return std::vector<prometheus::MetricFamily>{Gauge("g", "a gauge", 1)};
  });
  EXPECT_TRUE(exporter.ok()) << exporter.status();
  return exporter.ok() ? *std::move(exporter) : nullptr;
}

TEST(ExporterTest, AnswersOverHttpWhatRouteRequestSays) {
  auto exporter = StartGauge();
  ASSERT_NE(exporter, nullptr);
  const int port = exporter->port();
  const std::string ok = HttpGet(port, "/metrics?name[]=g");
  EXPECT_THAT(ok, ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("\ng 1\n"));
  EXPECT_THAT(HttpGet(port, "/"), HasSubstr(" 404 "));
  EXPECT_THAT(HttpRequest(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc"),
              HasSubstr(" 405 "));
  EXPECT_THAT(HttpRequest(port, "\x16\x03\x01 garbage\r\n\r\n"), HasSubstr(" 400 "));
}

TEST(ExporterTest, AnOversizedHeadIsRefusedAndTheNextScrapeServed) {
  auto exporter = StartGauge();
  ASSERT_NE(exporter, nullptr);
  const std::string huge =
      "GET /metrics HTTP/1.1\r\nX: " + std::string(2 * Exporter::kMaxHeadBytes, 'a') + "\r\n\r\n";
  EXPECT_THAT(HttpRequest(exporter->port(), huge), HasSubstr(" 431 "));
  EXPECT_THAT(HttpGet(exporter->port(), "/metrics"), HasSubstr("\ng 1\n"));
}

// A value of the page's, e.g. "process_threads".
double Sample(const std::string& page, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = page.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + key.size()));
}

// Test A of issue 35: 50 clients each hold half a request head; a scrape is
// answered within a fifth of the head deadline (so it cannot pass by
// outliving them), and threads and memory stay near their idle values.
TEST(ExporterTest, SlowClientsDoNotDelayAScrape) {
  auto exporter = StartGauge();
  ASSERT_NE(exporter, nullptr);
  const std::string idle = HttpGet(exporter->port(), "/metrics");
  const double idle_threads = Sample(idle, "process_threads");
  const double idle_rss = Sample(idle, "process_resident_memory_bytes");
  ASSERT_GT(idle_threads, 0) << idle;
  std::vector<TestConnection> slow;
  for (int i = 0; i < 50; ++i) {
    slow.push_back(TestConnection::Open(exporter->port()));
    ASSERT_TRUE(slow.back().ok());
    ASSERT_TRUE(slow.back().Send("GET /metrics HTTP/1.1\r\nHost: 127"));
  }
  const absl::Time start = absl::Now();
  const std::string page = HttpGet(exporter->port(), "/metrics");
  const absl::Duration took = absl::Now() - start;
  EXPECT_THAT(page, HasSubstr("\ng 1\n"));
  EXPECT_LT(took, Exporter::kHeadTimeout / 5) << took;
  const double threads = Sample(page, "process_threads");
  const double rss = Sample(page, "process_resident_memory_bytes");
  std::printf(
      "idle: %.0f threads, %.1f MiB; with 50 slow clients: %.0f threads, %.1f MiB; "
      "scrape in %s\n",
      idle_threads, idle_rss / (1 << 20), threads, rss / (1 << 20),
      absl::FormatDuration(took).c_str());
  EXPECT_LE(threads, idle_threads + 1 + 8);  // one serving thread (the pool), + 8
  EXPECT_LE(rss, idle_rss + 16 * (1 << 20));
  for (TestConnection& c : slow) EXPECT_FALSE(c.ClosedWithin(absl::ZeroDuration()));
}

// Test B: limit + 20 idle connections. Those past the limit are closed at
// once; the others at the head deadline, after which a scrape succeeds.
TEST(ExporterTest, PastTheLimitConnectionsAreClosedAtOnceAndIdleOnesAtTheDeadline) {
  auto exporter = StartGauge();
  ASSERT_NE(exporter, nullptr);
  const absl::Time start = absl::Now();
  std::vector<TestConnection> idle;
  for (int i = 0; i < Exporter::kMaxConnections + 20; ++i) {
    idle.push_back(TestConnection::Open(exporter->port()));
    ASSERT_TRUE(idle.back().ok()) << i;
  }
  int closed_at_once = 0;
  for (int i = 0; i < static_cast<int>(idle.size()); ++i) {
    if (idle[i].ClosedWithin(i < Exporter::kMaxConnections ? absl::ZeroDuration()
                                                           : absl::Seconds(1))) {
      ++closed_at_once;
    }
  }
  EXPECT_EQ(closed_at_once, 20);
  EXPECT_EQ(exporter->connections_refused(), 20);
  // Scrapes are refused too until the idle ones miss their deadline.
  std::string page;
  for (int attempt = 0;
       attempt < 200 && absl::Now() - start < Exporter::kHeadTimeout + absl::Seconds(1);
       ++attempt) {
    page = HttpGet(exporter->port(), "/metrics");
    if (!page.empty()) break;
    absl::SleepFor(absl::Milliseconds(50));  // between attempts of a polling client
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_THAT(page, HasSubstr("\ng 1\n"));
  EXPECT_LE(took, Exporter::kHeadTimeout + absl::Seconds(1));
  EXPECT_GE(took, Exporter::kHeadTimeout - absl::Milliseconds(100));
  for (int i = 0; i < Exporter::kMaxConnections; ++i) {
    EXPECT_TRUE(idle[i].ClosedWithin(absl::Seconds(1))) << i;
  }
  EXPECT_EQ(exporter->connections_overdue(), Exporter::kMaxConnections);
}

TEST(ExporterTest, AHeadTrickledByteByByteIsClosedAtTheDeadline) {
  auto exporter = StartGauge();
  ASSERT_NE(exporter, nullptr);
  TestConnection c = TestConnection::Open(exporter->port());
  ASSERT_TRUE(c.ok());
  const absl::Time start = absl::Now();
  const std::string head = "GET /metrics HTTP/1.1\r\nX: " + std::string(200, 'a');
  bool closed = false;
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    closed = !c.Send(head.substr(i, 1)) || c.ClosedWithin(absl::Milliseconds(100));
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(closed);
  EXPECT_GE(took, Exporter::kHeadTimeout - absl::Milliseconds(100));
  EXPECT_LE(took, Exporter::kHeadTimeout + absl::Seconds(2));
  EXPECT_EQ(exporter->connections_overdue(), 1);
}

}  // namespace
}  // namespace metrics
}  // namespace psc
