// ParameterClient over gRPC: one channel per shard, concurrent calls through
// the callback API, and retries with backoff while a shard is UNAVAILABLE
// (restarting), up to a retry window.
#ifndef PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
#define PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/parameter_client.h"
#include "common/rpc/security.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {

// Thread-safe.
class GrpcParameterClient : public ParameterClient {
 public:
  // `addresses[i]` is shard i. UNAVAILABLE answers are retried with
  // exponential backoff until `retry_window` has passed since the call began.
  GrpcParameterClient(const std::vector<std::string>& addresses, const SecurityOptions& security,
                      absl::Duration retry_window = absl::Seconds(60));

  int num_shards() const override { return static_cast<int>(stubs_.size()); }
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status Configure(int shard, const proto::ConfigureRequest& request) override;
  absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) override;
  absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response) override;
  absl::Status SaveCheckpoint(int shard, const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response) override;
  absl::Status RestoreCheckpoint(int shard, const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response) override;
  absl::StatusOr<proto::ShardStats> GetStats(int shard) override;

  // Cancels every call in flight and fails every later one with CANCELLED
  // (a worker shutting down must not wait out a 10-minute sync pull).
  void CancelAll();

 private:
  template <typename Call>
  absl::Status WithRetries(int shard, absl::Duration timeout, const char* what, Call call);
  template <typename Request, typename Response, typename Method>
  absl::Status CallAll(const std::vector<Request>& requests, std::vector<Response>* responses,
                       absl::Duration timeout, const char* what, Method method);

  const SecurityOptions security_;
  const absl::Duration retry_window_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psc

#endif  // PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
