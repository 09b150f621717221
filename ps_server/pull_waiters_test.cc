#include "ps_server/pull_waiters.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

PullWaiters::Waiter Waiter(int64_t min_version, absl::Time deadline) {
  proto::PullRequest r;
  r.set_min_version(min_version);
  return PullWaiters::Waiter{r, deadline, nullptr, [](absl::Status) {}};
}

TEST(PullWaitersTest, TakesTheReadyOnesInArrivalOrder) {
  PullWaiters waiters;
  const absl::Time t = absl::UnixEpoch() + absl::Seconds(10);
  waiters.Add(Waiter(3, t));
  waiters.Add(Waiter(1, t));
  waiters.Add(Waiter(2, t));
  auto ready = waiters.TakeReady([](const proto::PullRequest& r) { return r.min_version() <= 2; });
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].request.min_version(), 1);
  EXPECT_EQ(ready[1].request.min_version(), 2);
  EXPECT_EQ(waiters.size(), 1);
}

TEST(PullWaitersTest, TakesTheExpiredOnesAndAllOnShutdown) {
  PullWaiters waiters;
  const absl::Time t0 = absl::UnixEpoch();
  waiters.Add(Waiter(1, t0 + absl::Seconds(1)));
  waiters.Add(Waiter(1, t0 + absl::Seconds(5)));
  waiters.Add(Waiter(1, t0 + absl::Seconds(2)));
  EXPECT_EQ(waiters.TakeExpired(t0).size(), 0u);
  EXPECT_EQ(waiters.TakeExpired(t0 + absl::Seconds(2)).size(), 2u) << "a deadline at now expires";
  EXPECT_EQ(waiters.size(), 1);
  EXPECT_EQ(waiters.TakeAll().size(), 1u);
  EXPECT_EQ(waiters.size(), 0);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
