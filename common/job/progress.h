// A Keras-style progress display. On a terminal: one line per epoch that
// updates in place during the epoch, with Keras's ETA. Otherwise (a pipe, a
// file, the launcher): a plain progress line every `cadence` (5 s) during
// the epoch, and one line per epoch.
//
// The two throughputs a run prints are named apart: the epoch line's
// "examples/s (wall)" is over the epoch's wall time (pauses for
// --eval_every_steps and checkpoints included); the final line's
// "training examples/s" is over the units' time only (job_result.h).
#ifndef PSC_COMMON_JOB_PROGRESS_H_
#define PSC_COMMON_JOB_PROGRESS_H_

#include <cstdint>
#include <cstdio>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/job/job_result.h"

namespace psc {
namespace job {

// Thread-compatible.
class ProgressPrinter {
 public:
  // `out` and `clock` (which paces the redraws; the system clock when null)
  // are not owned. `terminal` defaults to DrawsInPlace(out).
  explicit ProgressPrinter(FILE* out, base::Clock* clock = nullptr);
  ProgressPrinter(FILE* out, bool terminal, base::Clock* clock = nullptr)
      : out_(out), terminal_(terminal), clock_(clock != nullptr ? clock : &real_clock_) {}

  // During an epoch, `elapsed` into it: redraws the line on a terminal (at
  // most 10 times a second); otherwise prints a line when `cadence` has
  // passed since the last one (or since the first call).
  // `metrics`: the compiled metrics' values so far, after the accuracy.
  void Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
            double accuracy, double examples_per_sec, absl::Duration elapsed,
            const MetricValues& metrics = {});
  // How often a non-terminal progress line is printed.
  void set_cadence(absl::Duration cadence) { cadence_ = cadence; }
  // Whether `out` gets the in-place bar: PSC_PROGRESS=terminal (the
  // launcher sets it when its own stdout is a terminal) or =lines decide;
  // otherwise isatty(out).
  static bool DrawsInPlace(FILE* out);

  // The epoch's final line, always printed.
  // `workers`, when not empty, ends the line (" - workers: ...": the
  // membership's changes so far).
  void EpochEnd(const EpochRecord& record, int64_t epochs, int64_t steps, double examples_per_sec,
                absl::string_view workers = "");

 private:
  FILE* const out_;
  const bool terminal_;
  base::RealClock real_clock_;
  base::Clock* const clock_;
  absl::Time last_draw_ = absl::InfinitePast();
  absl::Time last_line_ = absl::InfinitePast();  // non-terminal
  absl::Duration cadence_ = absl::Seconds(5);
};

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_PROGRESS_H_
