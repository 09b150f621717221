// The ParameterClient every role uses: where a gradient crosses the wire.
// Per shard it holds a ShardTransport (every call) and, optionally, a
// DataPath (Push and Pull over the data channel when the shard offers one),
// and every call goes through one loop:
//
//   try the call once (Push/Pull: the DataPath if it takes it, else the
//   ShardTransport) with the call's timeout;
//   UNAVAILABLE (the shard restarts, a connection broke) is retried with
//   exponential backoff until retry_window has passed since the call
//   began; a retried push is safe, shards apply each PushId once;
//   CancelAll ends the calls in flight and fails later ones (CANCELLED);
//   in PushAll and PullAll, the first shard to fail cancels the others.
//
// Errors name the shard and the call: "ps:1 (host:port) Push: <message>".
#ifndef PSC_COMMON_PS_CLIENT_PARAMETER_SERVER_CLIENT_H_
#define PSC_COMMON_PS_CLIENT_PARAMETER_SERVER_CLIENT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/ps_client/call_group.h"
#include "common/ps_client/cancellation.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/shard_transport.h"

namespace psc {
namespace ps_client {

// How the client reaches one shard.
struct ShardEndpoint {
  std::string name;  // for messages, e.g. "ps:1 (10.0.0.7:2222)"
  std::unique_ptr<ShardTransport> transport;
  std::unique_ptr<DataPath> data;  // null: everything over `transport`
};

struct ParameterServerClientOptions {
  // UNAVAILABLE is retried until this long after the call began.
  absl::Duration retry_window = absl::Seconds(60);
  // Reads the time and sleeps between retries; null: the system clock.
  base::Clock* clock = nullptr;
};

// Thread-safe.
class ParameterServerClient : public ParameterClient {
 public:
  explicit ParameterServerClient(std::vector<ShardEndpoint> shards,
                                 ParameterServerClientOptions options = {});

  int num_shards() const override { return static_cast<int>(shards_.size()); }
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status Push(int shard, const proto::PushRequest& request, proto::PushResponse* response,
                    absl::Duration timeout) override;
  absl::Status Pull(int shard, const proto::PullRequest& request, proto::PullResponse* response,
                    absl::Duration timeout) override;
  absl::Status Configure(int shard, const proto::ConfigureRequest& request) override;
  absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) override;
  absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response) override;
  absl::Status SaveCheckpoint(int shard, const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response) override;
  absl::Status RestoreCheckpoint(int shard, const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response) override;
  absl::Status ExportState(int shard, const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response) override;
  absl::Status ImportState(int shard, const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response) override;
  absl::StatusOr<proto::ShardStats> GetStats(int shard) override;

  // Cancels every call in flight and fails every later one with CANCELLED
  // (a worker shutting down must not wait out a 10-minute sync pull).
  void CancelAll() override { cancelled_.Cancel(); }
  // Every call that began before this returns CANCELLED, retries included.
  void CancelInFlight() override {
    interrupts_.fetch_add(1);
    cancelled_.Interrupt();
  }

  // How many Push/Pull calls went over a DataPath (tests, benchmarks).
  int64_t data_channel_calls() const;

  // What a worker's metrics report: PushAll and PullAll calls (a push or
  // pull in parts counts each part), and the
  // attempts retried (of any call, to any shard) after UNAVAILABLE.
  struct CallCounts {
    int64_t pushes = 0;
    int64_t pulls = 0;
    int64_t retries = 0;
  };
  CallCounts call_counts() const { return {pushes_.load(), pulls_.load(), retries_.load()}; }

 private:
  // The loop above for one call to one shard; `attempt(a)` tries it once.
  // `group`, if given, is the PushAll/PullAll the call belongs to.
  template <typename Try>
  absl::Status Call(int shard, const char* what, absl::Duration timeout, CallGroup* group,
                    Try attempt);
  // Sends requests[i] to shard i, all shards concurrently (the calling
  // thread takes shard 0), and waits for every answer.
  template <typename Request, typename Response>
  absl::Status CallAll(const std::vector<Request>& requests, std::vector<Response>* responses,
                       absl::Duration timeout, const char* what);

  const std::vector<ShardEndpoint> shards_;
  const absl::Duration retry_window_;
  base::RealClock real_clock_;
  base::Clock* const clock_;
  Cancellation cancelled_;               // CancelAll, CancelInFlight
  std::atomic<uint64_t> interrupts_{0};  // CancelInFlight calls so far
  std::atomic<int64_t> pushes_{0}, pulls_{0}, retries_{0};
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_PARAMETER_SERVER_CLIENT_H_
