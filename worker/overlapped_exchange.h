// parameter_server --overlap's step exchange (overlapped_push.h): each
// bucket of gradients goes to its shards from the backward pass's hook as
// soon as the pass has made it, and the next step's parameters come back in
// parts that the next forward pass takes layer by layer. With
// --straggler_factor the parts go out after the idle instead (a slow
// worker's gradients must not arrive early). The unit's last step takes the
// whole next version at once (the next unit may start from it).
#ifndef PSC_WORKER_OVERLAPPED_EXCHANGE_H_
#define PSC_WORKER_OVERLAPPED_EXCHANGE_H_

#include <memory>
#include <vector>

#include "worker/overlapped_push.h"
#include "worker/step_exchange.h"

namespace psc {
namespace worker {

class OverlappedExchange : public StepExchange {
 public:
  // Hooks the primary replica's forward and backward passes (it needs one
  // local replica: FAILED_PRECONDITION otherwise); OverlappedPush::Create's
  // errors.
  static absl::StatusOr<std::unique_ptr<OverlappedExchange>> Create(ExchangeContext context);

  absl::StatusOr<ExchangeResult> Step(const ExchangeStep& step, ExchangeTimes* times) override;
  // Ends the pulls of the next step's parameters still in flight: a sync
  // pull would wait for a step that may never complete.
  void FailUnit() override;

 private:
  explicit OverlappedExchange(ExchangeContext context);

  const proto::DataType wire_;
  std::unique_ptr<OverlappedPush> overlapped_;
  bool overlap_step_ = false;  // the hook sends this step's parts
  bool pull_step_ = false;     // the forward hook takes this step's parameters
  std::vector<proto::PushRequest> headers_;
  std::vector<proto::PushResponse> replies_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_OVERLAPPED_EXCHANGE_H_
