// ParameterClient over gRPC: one channel per shard, concurrent calls through
// the callback API, and retries with backoff while a shard is UNAVAILABLE
// (restarting), up to a retry window.
//
// Push and Pull take the data channel when the shard offers one (see
// common/data_channel/data_server.h): gRPC negotiates it (OpenDataChannel,
// token-checked), then the tensor bytes go over a plain TCP connection per
// shard, outside protobuf. Same requests, answers, errors and retries as over
// gRPC. A shard without one (--data_channel=false, TLS, an older server), a
// client built with data_channel = false or over TLS, and a second call
// while the shard's connection is busy all use gRPC.
#ifndef PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
#define PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/data_channel/data_client.h"
#include "common/ps_client/parameter_client.h"
#include "common/rpc/call_group.h"
#include "common/rpc/security.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {
namespace rpc {

// Thread-safe.
class GrpcParameterClient : public ps_client::ParameterClient {
 public:
  // `addresses[i]` is shard i. UNAVAILABLE answers are retried with
  // exponential backoff until `retry_window` has passed since the call began.
  GrpcParameterClient(const std::vector<std::string>& addresses, const SecurityOptions& security,
                      absl::Duration retry_window = absl::Seconds(60), bool data_channel = true);

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

  // For tests and benchmarks: how many Push/Pull calls went over the data
  // channel.
  int64_t data_channel_calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One shard's data channel.
  struct DataLink {
    absl::Mutex mu;  // held for a whole call: one call at a time
    std::unique_ptr<data_channel::DataConnection> connection ABSL_GUARDED_BY(mu);
    bool unsupported ABSL_GUARDED_BY(mu) = false;  // the shard has none: use gRPC
  };
  // The call over the data channel, or nullopt when it must go over gRPC.
  template <typename Request, typename Response>
  std::optional<absl::Status> DataCall(int shard, const Request& request, Response* response,
                                       absl::Duration timeout, const char* what, CallGroup* group);
  absl::Status OpenDataConnection(int shard, DataLink& link, CallGroup* group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link.mu);

  // `group`, if given, cancels this call when a sibling fails (and this
  // call's failure is reported to it by the caller).
  template <typename Call>
  absl::Status WithRetries(int shard, absl::Duration timeout, const char* what, Call call,
                           CallGroup* group = nullptr);
  template <typename Request, typename Response, typename Method>
  absl::Status CallAll(const std::vector<Request>& requests, std::vector<Response>* responses,
                       absl::Duration timeout, const char* what, Method method);

  const SecurityOptions security_;
  const absl::Duration retry_window_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  const bool data_channel_;
  std::vector<std::unique_ptr<DataLink>> links_;  // one per shard
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> in_flight_ ABSL_GUARDED_BY(mu_);
  std::set<data_channel::DataConnection*> data_in_flight_ ABSL_GUARDED_BY(mu_);
  int64_t data_channel_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_GRPC_PARAMETER_CLIENT_H_
