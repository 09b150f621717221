#include "worker/step_exchange.h"

#include <algorithm>

#include "common/base/status_macros.h"
#include "common/optimizer/optimizer.h"

namespace psc {
namespace worker {

absl::Status StepExchange::BeginUnit(const proto::RunUnitRequest& unit,
                                     const std::function<bool()>&, ExchangeTimes* times) {
  if (params().Reuse(unit.first_step())) return absl::OkStatus();
  const absl::Time t0 = ctx_.clock->Now();
  PSC_RETURN_IF_ERROR(params().Pull(unit.first_step()));
  times->comm += ctx_.clock->Now() - t0;
  return absl::OkStatus();
}

void StepExchange::Clip() {
  if (ctx_.job->optimizer().global_clipnorm() > 0) {
    optimizer::ClipByGlobalNorm(ctx_.job->optimizer().global_clipnorm(), ctx_.trainable,
                                &params().grads());
  }
}

int64_t NextStep(int64_t step, int64_t version, int64_t end, bool backups) {
  return backups ? std::max(step + 1, std::min(version, end)) : step + 1;
}

absl::Status IdleFor(base::Clock* clock, absl::Duration idle,
                     const std::function<bool()>& cancelled) {
  const absl::Time until = clock->Now() + idle;
  // In slices, so that a cancelled unit ends within one.
  for (absl::Time now = clock->Now(); now < until; now = clock->Now()) {
    if (cancelled && cancelled()) return absl::CancelledError("unit cancelled");
    clock->SleepFor(std::min(until - now, absl::Milliseconds(50)));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psc
