// A ParameterClient for tests of the roles' cores: one or more shards whose
// every call succeeds and answers nothing. A test overrides what it needs
// (records a call, answers pulls, holds pushes).
#ifndef PSC_COMMON_PS_CLIENT_TESTING_FAKE_PARAMETER_CLIENT_H_
#define PSC_COMMON_PS_CLIENT_TESTING_FAKE_PARAMETER_CLIENT_H_

#include <vector>

#include "common/ps_client/parameter_client.h"

namespace psc {
namespace ps_client {
namespace testing {

class FakeParameterClient : public ParameterClient {
 public:
  explicit FakeParameterClient(int shards = 1) : shards_(shards) {}
  int num_shards() const override { return shards_; }
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses, absl::Duration) override {
    responses->resize(requests.size());
    return absl::OkStatus();
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses, absl::Duration) override {
    responses->resize(requests.size());
    return absl::OkStatus();
  }
  absl::Status Configure(int, const proto::ConfigureRequest&) override { return absl::OkStatus(); }
  absl::Status CreateVariables(int, const proto::CreateVariablesRequest&) override {
    return absl::OkStatus();
  }
  absl::Status UpdateMembership(int, const proto::UpdateMembershipRequest&,
                                proto::UpdateMembershipResponse*) override {
    return absl::OkStatus();
  }
  absl::Status SaveCheckpoint(int, const proto::SaveCheckpointRequest&,
                              proto::SaveCheckpointResponse*) override {
    return absl::OkStatus();
  }
  absl::Status RestoreCheckpoint(int, const proto::RestoreCheckpointRequest&,
                                 proto::RestoreCheckpointResponse*) override {
    return absl::OkStatus();
  }
  absl::Status ExportState(int, const proto::ExportStateRequest&,
                           proto::ExportStateResponse*) override {
    return absl::OkStatus();
  }
  absl::Status ImportState(int, const proto::ImportStateRequest&,
                           proto::ImportStateResponse*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<proto::ShardStats> GetStats(int) override { return proto::ShardStats(); }
  void CancelAll() override {}
  void CancelInFlight() override {}

 private:
  const int shards_;
};

}  // namespace testing
}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_TESTING_FAKE_PARAMETER_CLIENT_H_
