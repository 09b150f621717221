// How one call reaches one parameter-server shard, once: no retry and no
// backoff, which the ParameterServerClient's single loop does for every
// transport. A ShardTransport carries every call: over gRPC in the daemons
// (common/rpc/grpc_shard_transport.h), straight into a ShardServer in the
// in-process tests (tests/testing/in_process_cluster.h). A DataPath carries
// Push and Pull beside it when it can: the data channel
// (data_channel_path.h).
//
// Each method makes one Attempt: it gives up after attempt.timeout, holds a
// CancelScope while it runs (so that CancelAll and a failing sibling end it),
// and answers the shard's status as it is (UNAVAILABLE means retryable).
// Implementations are thread-safe.
#ifndef PSC_COMMON_PS_CLIENT_SHARD_TRANSPORT_H_
#define PSC_COMMON_PS_CLIENT_SHARD_TRANSPORT_H_

#include <optional>

#include "absl/status/status.h"
#include "common/ps_client/cancellation.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_client {

class ShardTransport {
 public:
  virtual ~ShardTransport() = default;
  virtual absl::Status Push(const proto::PushRequest& request, proto::PushResponse* response,
                            const Attempt& attempt) = 0;
  virtual absl::Status Pull(const proto::PullRequest& request, proto::PullResponse* response,
                            const Attempt& attempt) = 0;
  virtual absl::Status Configure(const proto::ConfigureRequest& request,
                                 const Attempt& attempt) = 0;
  virtual absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                                       const Attempt& attempt) = 0;
  virtual absl::Status UpdateMembership(const proto::UpdateMembershipRequest& request,
                                        proto::UpdateMembershipResponse* response,
                                        const Attempt& attempt) = 0;
  virtual absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                      proto::SaveCheckpointResponse* response,
                                      const Attempt& attempt) = 0;
  virtual absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                         proto::RestoreCheckpointResponse* response,
                                         const Attempt& attempt) = 0;
  virtual absl::Status ExportState(const proto::ExportStateRequest& request,
                                   proto::ExportStateResponse* response,
                                   const Attempt& attempt) = 0;
  virtual absl::Status ImportState(const proto::ImportStateRequest& request,
                                   proto::ImportStateResponse* response,
                                   const Attempt& attempt) = 0;
  virtual absl::Status GetStats(proto::ShardStats* response, const Attempt& attempt) = 0;
  // Negotiates the shard's data channel (its port and a ticket);
  // FAILED_PRECONDITION or UNIMPLEMENTED when the shard has none.
  virtual absl::Status OpenDataChannel(proto::OpenDataChannelResponse* response,
                                       const Attempt& attempt) = 0;
};

// A second way to carry Push and Pull to a shard. nullopt: it cannot carry
// this call now (the shard offers none, or the path is busy with another
// call), which then goes over the shard's ShardTransport.
class DataPath {
 public:
  virtual ~DataPath() = default;
  virtual std::optional<absl::Status> Push(const proto::PushRequest& request,
                                           proto::PushResponse* response,
                                           const Attempt& attempt) = 0;
  virtual std::optional<absl::Status> Pull(const proto::PullRequest& request,
                                           proto::PullResponse* response,
                                           const Attempt& attempt) = 0;
  // Calls it carried (for tests and benchmarks).
  virtual int64_t calls() const = 0;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_SHARD_TRANSPORT_H_
