#include "common/metrics/exporter.h"

#include "absl/strings/str_cat.h"
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

TEST(ExporterTest, HttpReplyServesOnlyGetMetrics) {
  auto page = [] { return std::string("a 1\n"); };
  const std::string ok = HttpReply("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", page);
  EXPECT_THAT(ok, ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("Content-Length: 4\r\n"));
  EXPECT_THAT(ok, ::testing::EndsWith("\r\n\r\na 1\n"));
  EXPECT_THAT(HttpReply("GET /metrics?name[]=x HTTP/1.0\r\n\r\n", page), HasSubstr("200 OK"));
  EXPECT_THAT(HttpReply("GET / HTTP/1.1\r\n\r\n", page), HasSubstr("404 Not Found"));
  EXPECT_THAT(HttpReply("POST /metrics HTTP/1.1\r\n\r\n", page),
              HasSubstr("405 Method Not Allowed"));
  EXPECT_THAT(HttpReply("\x16\x03\x01 garbage\r\n\r\n", page), HasSubstr("400 Bad Request"));
  EXPECT_THAT(HttpReply("", page), HasSubstr("400 Bad Request"));
}

TEST(ExporterTest, ASlowOrOversizedRequestDoesNotStopTheServer) {
  auto exporter = Exporter::Start("127.0.0.1", 0, "ps", [] {
    return std::vector<prometheus::MetricFamily>{Gauge("g", "a gauge", 1)};
  });
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  // A head without its blank line, longer than the limit: answered 431.
  const std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'a');
  EXPECT_THAT(HttpRequest((*exporter)->port(), huge), HasSubstr("431"));
  // And the next scrape is served.
  EXPECT_THAT(HttpGet((*exporter)->port(), "/metrics"), HasSubstr("\ng 1\n"));
}

}  // namespace
}  // namespace metrics
}  // namespace psc
