#include "evaluator/chief_reporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace psc {
namespace evaluator {
namespace {

// 127.0.0.1 and a port that was free a moment ago: nothing answers there,
// as before the chief's container starts.
std::string NoChief() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
}

TEST(ChiefReporterTest, AnAnnouncementToNoChiefEndsWithItsPatience) {
  const ChiefReporter reporter(NoChief(), rpc::SecurityOptions(), 0);
  const absl::Time start = absl::Now();
  absl::Status s = reporter.Announce(1, absl::Seconds(1), [] { return false; });
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("Register"), absl::string_view::npos) << s;
  EXPECT_GE(took, absl::Milliseconds(900)) << "it retried until its patience ran out";
  EXPECT_LT(took, absl::Seconds(3)) << "an attempt of 1 s at most after the patience";
}

TEST(ChiefReporterTest, AStopEndsTheAnnouncementWithinASlice) {
  const ChiefReporter reporter(NoChief(), rpc::SecurityOptions(), 0);
  const absl::Time start = absl::Now();
  std::atomic<int> asked{0};
  absl::Status s = reporter.Announce(1, absl::Minutes(10), [&] {
    ++asked;
    return absl::Now() - start > absl::Milliseconds(300);
  });
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(s.ok());
  EXPECT_GE(asked.load(), 1);
  EXPECT_LT(took, absl::Milliseconds(1800)) << "the 10-minute patience did not hold it";
}

TEST(ChiefAnnouncerTest, DestroyingItStopsTheBackgroundAnnouncementSoon) {
  const ChiefReporter reporter(NoChief(), rpc::SecurityOptions(), 0);
  auto announcer = std::make_unique<ChiefAnnouncer>(&reporter, "chief_reporter_test");
  const absl::Time start = absl::Now();
  announcer.reset();  // joins its thread
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500));
}

}  // namespace
}  // namespace evaluator
}  // namespace psc
