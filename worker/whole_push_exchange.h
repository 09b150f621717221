// parameter_server's step exchange without --overlap: after the backward
// pass, the gradients (clipped by global_clipnorm, each variable as its
// placement declares: dense in the job's wire dtype, top-k, or the step's
// rows of a table) go to the servers in one push per shard, whose reply
// brings the next step's parameters but the tables'. Tables trained row by
// row (row_tables.h) get the step's rows in a pull before the passes. A non-finite step is pushed
// all the same, refused (step_refused): the servers refuse it and, in sync, fail the pulls waiting
// for the step at once, so no other worker waits for a step that cannot complete.
// --straggler_factor's idle comes between the pass and the push.
//
// CollectiveExchange derives from it: its gradients are the group's
// all-reduced sum, and the push goes to the worker's own replica.
#ifndef PSC_WORKER_WHOLE_PUSH_EXCHANGE_H_
#define PSC_WORKER_WHOLE_PUSH_EXCHANGE_H_

#include <vector>

#include "worker/step_exchange.h"

namespace psc {
namespace worker {

class WholePushExchange : public StepExchange {
 public:
  explicit WholePushExchange(ExchangeContext context);

  absl::StatusOr<ExchangeResult> Step(const ExchangeStep& step, ExchangeTimes* times) override;

 protected:
  // The step's gradients into params().grads(): the passes, and what the
  // gradients go through before they are pushed.
  virtual absl::Status Gradients(const ExchangeStep& step, compute::StepResult* result,
                                 ExchangeTimes* times);
  // Whether the push is the worker's own work (to a local replica): its
  // time is compute, not comm.
  virtual bool push_is_local() const { return false; }

 private:
  // The gradients split per shard as they travel (their declarations).
  absl::Status Encode(std::vector<std::vector<proto::NamedTensor>>* split);
  // The step's rows of the tables trained row by row, its ids remapped.
  absl::Status PullRows(const ExchangeStep& step, ExchangeTimes* times);

  const proto::DataType wire_;
  std::vector<std::vector<proto::NamedTensor>> split_;
  std::vector<proto::PushRequest> pushes_;
  std::vector<proto::PushResponse> replies_;
  std::vector<proto::PullResponse> rows_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WHOLE_PUSH_EXCHANGE_H_
