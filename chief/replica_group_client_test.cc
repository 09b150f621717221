#include "chief/replica_group_client.h"

#include <vector>

#include "common/ps_client/testing/fake_parameter_client.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

// One worker's replica: records what reached it; can be down.
class Replica : public ps_client::testing::FakeParameterClient {
 public:
  absl::Status Configure(int, const proto::ConfigureRequest& r) override {
    if (down) return absl::UnavailableError("down");
    configured.push_back(r);
    return absl::OkStatus();
  }
  absl::Status SaveCheckpoint(int, const proto::SaveCheckpointRequest&,
                              proto::SaveCheckpointResponse*) override {
    if (down) return absl::UnavailableError("down");
    ++saved;
    return absl::OkStatus();
  }
  absl::Status RestoreCheckpoint(int, const proto::RestoreCheckpointRequest&,
                                 proto::RestoreCheckpointResponse*) override {
    if (down) return absl::UnavailableError("down");
    ++restored;
    return absl::OkStatus();
  }
  absl::StatusOr<proto::ShardStats> GetStats(int) override {
    if (down) return absl::UnavailableError("down");
    proto::ShardStats s;
    s.set_version(version);
    return s;
  }
  bool down = false;
  int64_t version = 0;
  int saved = 0, restored = 0;
  std::vector<proto::ConfigureRequest> configured;
};

class ReplicaGroupClientTest : public ::testing::Test {
 protected:
  ReplicaGroupClientTest() : group_({&r_[0], &r_[1], &r_[2]}) {}
  Replica r_[3];
  ReplicaGroupClient group_;
};

TEST_F(ReplicaGroupClientTest, ConfiguresEveryLiveReplicaAsASyncShardOfOneReplica) {
  group_.SetLive([] { return std::vector<int>{0, 2}; });
  proto::ConfigureRequest c;
  c.set_num_workers(3);
  c.mutable_policy()->set_mode(proto::MODE_ASYNC);
  c.mutable_policy()->set_replicas_to_aggregate(2);
  ASSERT_TRUE(group_.Configure(0, c).ok());
  ASSERT_EQ(r_[0].configured.size(), 1u);
  EXPECT_TRUE(r_[1].configured.empty());  // not live
  ASSERT_EQ(r_[2].configured.size(), 1u);
  EXPECT_EQ(r_[0].configured[0].num_workers(), 1);
  EXPECT_EQ(r_[0].configured[0].policy().mode(), proto::MODE_SYNC);
  EXPECT_EQ(r_[0].configured[0].policy().replicas_to_aggregate(), 0);
  // A joining worker is configured the same way.
  ASSERT_TRUE(group_.ConfigureReplica(1).ok());
  ASSERT_EQ(r_[1].configured.size(), 1u);
  EXPECT_EQ(r_[1].configured[0].num_workers(), 1);
}

TEST_F(ReplicaGroupClientTest, OneLiveReplicaCheckpointsAndEveryOneRestores) {
  proto::SaveCheckpointResponse saved;
  ASSERT_TRUE(group_.SaveCheckpoint(0, {}, &saved).ok());
  EXPECT_EQ(r_[0].saved + r_[1].saved + r_[2].saved, 1);
  EXPECT_EQ(r_[0].saved, 1);
  proto::RestoreCheckpointResponse restored;
  ASSERT_TRUE(group_.RestoreCheckpoint(0, {}, &restored).ok());
  EXPECT_EQ(r_[0].restored + r_[1].restored + r_[2].restored, 3);
}

TEST_F(ReplicaGroupClientTest, ReadsGoToTheFirstLiveReplicaThatAnswers) {
  r_[0].down = true;
  r_[1].version = 7;
  auto stats = group_.GetStats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->version(), 7);
  proto::SaveCheckpointResponse saved;
  ASSERT_TRUE(group_.SaveCheckpoint(0, {}, &saved).ok());
  EXPECT_EQ(r_[1].saved, 1);
  // Every replica down: the first error, naming its worker.
  r_[1].down = r_[2].down = true;
  EXPECT_EQ(group_.GetStats(0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(group_.GetStats(0).status().message().find("worker:0"), std::string::npos);
  // A broadcast fails on the first replica that fails.
  EXPECT_FALSE(group_.Configure(0, {}).ok());
}

TEST_F(ReplicaGroupClientTest, MembershipIsAnsweredWithoutACallAndNothingIsPushed) {
  r_[0].down = r_[1].down = r_[2].down = true;
  proto::UpdateMembershipResponse r;
  EXPECT_TRUE(group_.UpdateMembership(0, {}, &r).ok());
  std::vector<proto::PushResponse> pushed;
  EXPECT_EQ(group_.PushAll({proto::PushRequest()}, &pushed, absl::Seconds(1)).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(group_.GetStats(1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(group_.ConfigureReplica(0).code(), absl::StatusCode::kFailedPrecondition);
  group_.SetLive([] { return std::vector<int>{}; });
  EXPECT_EQ(group_.GetStats(0).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace chief
}  // namespace psc
