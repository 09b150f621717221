// multi_worker_mirrored's step exchange: the replica's gradients (scaled by
// 1/global batch, the moving statistics by 1/group size) are summed over
// the group by an all-reduce, in buckets that start as the backward pass
// makes them (BucketedReducer, through the executor's gradient-ready hook
// when the worker has one local replica), and the sum is pushed to the
// worker's embedded replica (embedded_shard_client.h) as its step's one
// gradient: every member applies the same bits. The unit names the group
// (RunUnitRequest.group); a new name forms a new one (Gloo on the CPU,
// NCCL on a GPU) through the chief's store. A failed step leaves the group
// at once, so the peers' all-reduces fail too instead of waiting.
#ifndef PSC_WORKER_COLLECTIVE_EXCHANGE_H_
#define PSC_WORKER_COLLECTIVE_EXCHANGE_H_

#include <memory>
#include <string>

#include "common/collective/bucketed_reducer.h"
#include "common/collective/collective.h"
#include "worker/whole_push_exchange.h"

namespace psc {
namespace worker {

// How a multi_worker_mirrored worker reaches its group.
struct CollectiveSetup {
  collective::KeyValueStore* store = nullptr;  // the chief's store; not owned
  std::string hostname = "127.0.0.1";          // where this worker's peers reach it
};

class CollectiveExchange : public WholePushExchange {
 public:
  // FAILED_PRECONDITION without a store to form groups through.
  static absl::StatusOr<std::unique_ptr<CollectiveExchange>> Create(ExchangeContext context,
                                                                    const CollectiveSetup* setup);

  // How long an all-reduce may wait for a peer (the job's collective
  // timeout, 60 s by default).
  static absl::Duration Timeout(const proto::JobSpec& job);

  absl::Status BeginUnit(const proto::RunUnitRequest& unit, const std::function<bool()>& cancelled,
                         ExchangeTimes* times) override;
  void FailUnit() override;

 protected:
  absl::Status Gradients(const ExchangeStep& step, compute::StepResult* result,
                         ExchangeTimes* times) override;
  bool push_is_local() const override { return true; }

 private:
  explicit CollectiveExchange(ExchangeContext context) : WholePushExchange(std::move(context)) {}
  // Publishes what this member runs under the group's prefix and checks
  // that every other member runs the same (FAILED_PRECONDITION naming the
  // rank; DEADLINE_EXCEEDED if one never arrives), before any connection.
  absl::Status CheckPeersRunThisJob(const proto::RunUnitRequest& unit, absl::Duration timeout,
                                    const std::function<bool()>& cancelled);
  // Joins the unit's group unless this worker is in it already.
  // `cancelled` (may be empty) ends the waits for the peers (CANCELLED).
  absl::Status JoinGroup(const proto::RunUnitRequest& unit, const std::function<bool()>& cancelled);
  // The gradients of the step just computed into the reducer's slots (when
  // the hook did not), then the all-reduce's sums into the gradients.
  absl::Status ReduceStep(collective::ReduceTiming* timing);
  // Variable v's gradient is in its slot: scale a moving statistic, mark it.
  absl::Status SlotFilled(int v);

  CollectiveSetup setup_;
  std::unique_ptr<collective::Collective> group_;
  std::string group_prefix_;
  std::unique_ptr<collective::BucketedReducer> reducer_;
  bool hooked_ = false;  // the executor's hook fills the reducer's slots
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_COLLECTIVE_EXCHANGE_H_
