#include "common/ps_client/part_pusher.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_client {
namespace {

using ::testing::ElementsAre;

proto::PushRequest PartOf(int64_t step, int part) {
  proto::PushRequest p;
  p.mutable_id()->set_step(step);
  p.mutable_id()->set_part(part);
  return p;
}

// Records each shard's parts in the order they arrive, answering with the
// part's index as the version; a shard may fail a part or hold it.
class PartsClient : public testing::FakeParameterClient {
 public:
  explicit PartsClient(int shards) : FakeParameterClient(shards), seen_(shards) {}

  absl::Status Push(int shard, const proto::PushRequest& request, proto::PushResponse* response,
                    absl::Duration) override {
    {
      absl::MutexLock lock(&mu_);
      // One part at a time per shard.
      EXPECT_FALSE(busy_[shard]) << "shard " << shard << " got two parts at once";
      busy_[shard] = true;
    }
    if (shard == hold_shard_) {
      held_.Notify();
      release_.WaitForNotification();
    }
    absl::MutexLock lock(&mu_);
    busy_[shard] = false;
    seen_[shard].push_back(request.id().part());
    if (shard == fail_shard_ && request.id().part() == fail_part_) {
      return absl::UnavailableError("shard down");
    }
    if (cancel_ends_held_ && cancelled_) return absl::CancelledError("ended");
    response->set_version(request.id().part());
    return absl::OkStatus();
  }
  absl::Status Pull(int shard, const proto::PullRequest& request, proto::PullResponse* response,
                    absl::Duration) override {
    if (shard == hold_pull_shard_) {
      absl::MutexLock lock(&mu_);
      if (!pull_held_.HasBeenNotified()) pull_held_.Notify();
      mu_.Await(absl::Condition(&cancelled_));
      return absl::CancelledError("ended");
    }
    absl::MutexLock lock(&mu_);
    seen_[shard].push_back(100 + request.min_version());
    response->set_version(request.min_version());
    return absl::OkStatus();
  }
  void CancelInFlight() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!release_.HasBeenNotified()) release_.Notify();
  }
  std::vector<int> seen(int shard) {
    absl::MutexLock lock(&mu_);
    return seen_[shard];
  }

  int fail_shard_ = -1, fail_part_ = -1, hold_shard_ = -1, hold_pull_shard_ = -1;
  bool cancel_ends_held_ = false;
  absl::Notification held_, release_, pull_held_;

 private:
  absl::Mutex mu_;
  std::vector<std::vector<int>> seen_ ABSL_GUARDED_BY(mu_);
  bool busy_[4] ABSL_GUARDED_BY(mu_) = {};
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

proto::PullRequest PullOf(int64_t tag) {
  proto::PullRequest p;
  p.set_min_version(tag);
  return p;
}

TEST(PartPusherTest, EachShardGetsItsPartsInOrderOneAtATime) {
  PartsClient client(3);
  PartPusher pusher(&client, absl::Seconds(10));
  for (int step = 0; step < 3; ++step) {
    for (int part = 0; part < 5; ++part) {
      pusher.Send(0, PartOf(step, part));
      if (part < 2) pusher.Send(2, PartOf(step, part));
    }
    std::vector<proto::PushResponse> last;
    ASSERT_TRUE(pusher.Wait(&last).ok());
    ASSERT_EQ(last.size(), 3u);
    EXPECT_EQ(last[0].version(), 4);  // the answer to each shard's last part
    EXPECT_EQ(last[1].version(), 0);  // no part: an empty answer
    EXPECT_EQ(last[2].version(), 1);
    absl::Duration comm;
    ASSERT_TRUE(pusher.EndRound(&comm).ok());
    EXPECT_GE(comm, absl::ZeroDuration());
  }
  EXPECT_THAT(client.seen(0), ElementsAre(0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4));
  EXPECT_THAT(client.seen(1), ElementsAre());
  EXPECT_THAT(client.seen(2), ElementsAre(0, 1, 0, 1, 0, 1));
}

TEST(PartPusherTest, WaitWithNothingSentReturnsAtOnce) {
  PartsClient client(2);
  PartPusher pusher(&client, absl::Seconds(10));
  std::vector<proto::PushResponse> last;
  EXPECT_TRUE(pusher.Wait(&last).ok());
  EXPECT_EQ(last.size(), 2u);
  absl::Duration comm = absl::Seconds(1);
  EXPECT_TRUE(pusher.EndRound(&comm).ok());
  EXPECT_EQ(comm, absl::ZeroDuration());
}

TEST(PartPusherTest, TheFirstErrorDropsTheRestAndEndsTheCallsInFlight) {
  PartsClient client(2);
  client.fail_shard_ = 0;
  client.fail_part_ = 1;
  client.hold_shard_ = 1;  // shard 1's call hangs until cancelled
  client.cancel_ends_held_ = true;
  PartPusher pusher(&client, absl::Seconds(10));
  pusher.Send(1, PartOf(0, 0));
  client.held_.WaitForNotification();  // shard 1's call is in flight
  for (int part = 0; part < 4; ++part) pusher.Send(0, PartOf(0, part));
  std::vector<proto::PushResponse> last;
  absl::Status s = pusher.Wait(&last);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(client.seen(0), ElementsAre(0, 1));  // parts 2 and 3 never sent
  EXPECT_THAT(client.seen(1), ElementsAre(0));
  absl::Duration comm;
  EXPECT_EQ(pusher.EndRound(&comm).code(), absl::StatusCode::kUnavailable);
  // The next round starts clean.
  client.fail_shard_ = -1;
  client.cancel_ends_held_ = false;  // CancelInFlight ends only the calls it found
  pusher.Send(0, PartOf(1, 0));
  EXPECT_TRUE(pusher.Wait(&last).ok());
  EXPECT_EQ(last[0].version(), 0);
}

// A shard's pulls go after its push parts, in the order queued, and each
// answer is kept under its index until taken; Wait does not wait for them.
TEST(PartPusherTest, PullsFollowTheirShardsPartsAndAreTakenByIndex) {
  PartsClient client(2);
  PartPusher pusher(&client, absl::Seconds(10));
  for (int round = 0; round < 2; ++round) {
    pusher.Send(0, PartOf(round, 0));
    pusher.Send(0, PartOf(round, 1));
    pusher.SendPull(0, PullOf(1));
    pusher.SendPull(0, PullOf(2));
    pusher.Send(1, PartOf(round, 0));
    pusher.SendPull(1, PullOf(3));
    std::vector<proto::PushResponse> last;
    ASSERT_TRUE(pusher.Wait(&last).ok());
    EXPECT_EQ(last[0].version(), 1);
    proto::PullResponse r;
    ASSERT_TRUE(pusher.WaitPull(1, 0, &r).ok());
    EXPECT_EQ(r.version(), 3);
    ASSERT_TRUE(pusher.WaitPull(0, 1, &r).ok());
    EXPECT_EQ(r.version(), 2);
    EXPECT_EQ(pusher.WaitPull(0, 1, &r).code(), absl::StatusCode::kInvalidArgument) << "taken once";
    EXPECT_EQ(pusher.WaitPull(0, 2, &r).code(), absl::StatusCode::kInvalidArgument)
        << "never queued";
    ASSERT_TRUE(pusher.WaitPull(0, 0, &r).ok());
    EXPECT_EQ(r.version(), 1);
    absl::Duration comm;
    ASSERT_TRUE(pusher.EndRound(&comm).ok());
    EXPECT_EQ(pusher.WaitPull(0, 0, &r).code(), absl::StatusCode::kInvalidArgument)
        << "a round's answers end with it";
  }
  EXPECT_THAT(client.seen(0), ElementsAre(0, 1, 101, 102, 0, 1, 101, 102));
  EXPECT_THAT(client.seen(1), ElementsAre(0, 103, 0, 103));
}

// A failed push fails the pulls behind it, which are never sent.
TEST(PartPusherTest, AFailedPartFailsThePullsQueuedBehindIt) {
  PartsClient client(1);
  client.fail_shard_ = 0;
  client.fail_part_ = 0;
  PartPusher pusher(&client, absl::Seconds(10));
  pusher.Send(0, PartOf(0, 0));
  pusher.SendPull(0, PullOf(1));
  proto::PullResponse r;
  EXPECT_EQ(pusher.WaitPull(0, 0, &r).code(), absl::StatusCode::kUnavailable);
  absl::Duration comm;
  EXPECT_EQ(pusher.EndRound(&comm).code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.seen(0), ElementsAre(0));
}

// Abort ends a pull that would wait (a sync step that will not complete)
// and drops what is queued behind it; the next round runs normally.
TEST(PartPusherTest, AbortEndsAWaitingPullAndDropsTheRest) {
  PartsClient client(1);
  client.hold_pull_shard_ = 0;
  PartPusher pusher(&client, absl::Seconds(10));
  pusher.SendPull(0, PullOf(1));
  pusher.SendPull(0, PullOf(2));
  ASSERT_TRUE(client.pull_held_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  pusher.Abort();
  absl::Duration comm;
  EXPECT_EQ(pusher.EndRound(&comm).code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(client.seen(0), ElementsAre()) << "the second pull was dropped";
  client.hold_pull_shard_ = -1;
  pusher.Send(0, PartOf(1, 0));
  pusher.SendPull(0, PullOf(4));
  proto::PullResponse r;
  ASSERT_TRUE(pusher.WaitPull(0, 0, &r).ok());
  EXPECT_EQ(r.version(), 4);
  EXPECT_TRUE(pusher.EndRound(&comm).ok());
}

}  // namespace
}  // namespace ps_client
}  // namespace psc
