#include "common/job/progress.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_format.h"

namespace psc {
namespace job {
namespace {

std::string Bar(int64_t step, int64_t steps) {
  constexpr int kWidth = 30;
  const int filled = steps > 0 ? static_cast<int>(kWidth * step / steps) : kWidth;
  std::string bar(kWidth, '.');
  for (int i = 0; i < filled; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  return bar;
}

}  // namespace

ProgressPrinter::ProgressPrinter(FILE* out, base::Clock* clock)
    : ProgressPrinter(out, isatty(fileno(out)) == 1, clock) {}

void ProgressPrinter::Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                           double accuracy, double examples_per_sec) {
  if (!terminal_) return;
  const absl::Time now = clock_->Now();
  if (now - last_draw_ < absl::Milliseconds(100) && step < steps) return;
  last_draw_ = now;
  std::string line = absl::StrFormat(
      "\rEpoch %d/%d %d/%d [%s] - %.0f examples/s - loss: %.4f - accuracy: %.4f", epoch, epochs,
      step, steps, Bar(step, steps), examples_per_sec, loss, accuracy);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void ProgressPrinter::EpochEnd(const EpochRecord& r, int64_t epochs, int64_t steps,
                               double examples_per_sec) {
  std::string line = absl::StrFormat(
      "%sEpoch %d/%d %d/%d [%s] - %.1fs - %.0f examples/s - loss: %.4f - accuracy: %.4f - "
      "val_loss: %.4f - val_accuracy: %.4f\n",
      terminal_ ? "\r" : "", r.epoch, epochs, steps, steps, Bar(steps, steps), r.wall_s,
      examples_per_sec, r.loss, r.accuracy, r.val_loss, r.val_accuracy);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

}  // namespace job
}  // namespace psc
