// The chief's wait, after a job that checkpointed, for the evaluator to
// evaluate the final checkpoint (chief --evaluator_wait).
#ifndef PSC_CHIEF_FINAL_EVALUATION_H_
#define PSC_CHIEF_FINAL_EVALUATION_H_

#include <cstdint>

#include "absl/time/time.h"
#include "chief/task_registry.h"
#include "common/base/clock.h"

namespace psc {
namespace chief {

// With an evaluator (TaskRegistry::has_evaluator: in the chief's TF_CONFIG,
// or announced by itself): waits up to `wait`, polling `registry` on
// `clock`, until it reported `final_step` evaluated, and logs what
// happened. True when it did, or when there is nothing to wait for (no
// evaluator, `wait` 0).
bool WaitForFinalEvaluation(const char* program, const TaskRegistry& registry, int64_t final_step,
                            absl::Duration wait, base::Clock* clock);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_FINAL_EVALUATION_H_
