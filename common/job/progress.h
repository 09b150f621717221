// A Keras-style progress display: on a terminal, one line per epoch that
// updates in place during the epoch; otherwise one plain line per epoch.
#ifndef PSC_COMMON_JOB_PROGRESS_H_
#define PSC_COMMON_JOB_PROGRESS_H_

#include <cstdint>
#include <cstdio>

#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/job/job_result.h"

namespace psc {
namespace job {

// Thread-compatible.
class ProgressPrinter {
 public:
  // `out` and `clock` (which paces the redraws; the system clock when null)
  // are not owned. `terminal` defaults to isatty(out).
  explicit ProgressPrinter(FILE* out, base::Clock* clock = nullptr);
  ProgressPrinter(FILE* out, bool terminal, base::Clock* clock = nullptr)
      : out_(out), terminal_(terminal), clock_(clock != nullptr ? clock : &real_clock_) {}

  // During an epoch: redraws the line on a terminal (at most 10 times a
  // second); prints nothing otherwise.
  void Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
            double accuracy, double examples_per_sec);
  // The epoch's final line, always printed.
  void EpochEnd(const EpochRecord& record, int64_t epochs, int64_t steps, double examples_per_sec);

 private:
  FILE* const out_;
  const bool terminal_;
  base::RealClock real_clock_;
  base::Clock* const clock_;
  absl::Time last_draw_ = absl::InfinitePast();
};

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_PROGRESS_H_
