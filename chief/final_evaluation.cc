#include "chief/final_evaluation.h"

#include <algorithm>

#include "common/base/logging.h"

namespace psc {
namespace chief {

bool WaitForFinalEvaluation(const char* program, const TaskRegistry& registry, int64_t final_step,
                            absl::Duration wait, base::Clock* clock) {
  if (!registry.has_evaluator() || wait <= absl::ZeroDuration()) return true;
  if (registry.evaluated_step() < final_step) {
    base::Logf("%s: waiting up to %s for the evaluator to evaluate the final checkpoint (step %d)",
               program, absl::FormatDuration(wait), final_step);
  }
  const absl::Time give_up = clock->Now() + wait;
  constexpr absl::Duration kPoll = absl::Milliseconds(200);
  while (registry.evaluated_step() < final_step && clock->Now() < give_up) {
    clock->SleepFor(std::min(kPoll, give_up - clock->Now()));
  }
  if (registry.evaluated_step() >= final_step) {
    base::Logf("%s: the evaluator evaluated step %d", program, final_step);
    return true;
  }
  base::Logf(
      "%s: the evaluator did not report step %d within --evaluator_wait=%s (last: %d); "
      "exiting anyway",
      program, final_step, absl::FormatDuration(wait), registry.evaluated_step());
  return false;
}

}  // namespace chief
}  // namespace psc
