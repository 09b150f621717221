#include "common/job/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
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

// Keras's ETA: the epoch's time so far per step, times the steps left.
std::string Eta(int64_t step, int64_t steps, absl::Duration elapsed) {
  if (step <= 0 || step >= steps) return "ETA: 0s";
  const int64_t seconds =
      static_cast<int64_t>(absl::ToDoubleSeconds(elapsed) * (steps - step) / step + 0.5);
  if (seconds >= 3600)
    return absl::StrFormat("ETA: %d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60);
  if (seconds >= 60) return absl::StrFormat("ETA: %d:%02d", seconds / 60, seconds % 60);
  return absl::StrFormat("ETA: %ds", seconds);
}

}  // namespace

ProgressPrinter::ProgressPrinter(FILE* out, base::Clock* clock)
    : ProgressPrinter(out, DrawsInPlace(out), clock) {}

bool ProgressPrinter::DrawsInPlace(FILE* out) {
  const char* env = std::getenv("PSC_PROGRESS");
  if (env != nullptr && std::string(env) == "terminal") return true;
  if (env != nullptr && std::string(env) == "lines") return false;
  return isatty(fileno(out)) == 1;
}

namespace {

// " - mae: 0.1234" per metric, with `prefix` ("val_") before each name.
// " - accuracy: 0.8123" (with `prefix`); nothing for a NaN, the accuracy
// of a regression, which has none.
std::string AccuracyText(double accuracy, const char* prefix = "") {
  if (std::isnan(accuracy)) return "";
  return absl::StrFormat(" - %saccuracy: %.4f", prefix, accuracy);
}

std::string MetricsText(const MetricValues& metrics, const char* prefix = "") {
  std::string out;
  for (const auto& [name, value] : metrics) {
    absl::StrAppend(&out, absl::StrFormat(" - %s%s: %.4f", prefix, name, value));
  }
  return out;
}

}  // namespace

void ProgressPrinter::Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                           double accuracy, double examples_per_sec, absl::Duration elapsed,
                           const MetricValues& metrics) {
  const absl::Time now = clock_->Now();
  if (!terminal_) {
    if (last_line_ == absl::InfinitePast()) last_line_ = now;  // the first after the cadence
    if (now - last_line_ < cadence_ || step >= steps) return;  // the epoch line follows
    last_line_ = now;
    const std::string line = absl::StrFormat(
        "Epoch %d/%d %d/%d - %.0fs - %s - %.0f examples/s - loss: %.4f%s%s\n", epoch, epochs, step,
        steps, absl::ToDoubleSeconds(elapsed), Eta(step, steps, elapsed), examples_per_sec, loss,
        AccuracyText(accuracy), MetricsText(metrics));
    std::fputs(line.c_str(), out_);
    std::fflush(out_);
    return;
  }
  if (now - last_draw_ < absl::Milliseconds(100) && step < steps) return;
  last_draw_ = now;
  std::string line =
      absl::StrFormat("\rEpoch %d/%d %d/%d [%s] - %s - %.0f examples/s - loss: %.4f%s%s", epoch,
                      epochs, step, steps, Bar(step, steps), Eta(step, steps, elapsed),
                      examples_per_sec, loss, AccuracyText(accuracy), MetricsText(metrics));
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void ProgressPrinter::EpochEnd(const EpochRecord& r, int64_t epochs, int64_t steps,
                               double examples_per_sec, absl::string_view workers) {
  std::string line = absl::StrFormat(
      "%sEpoch %d/%d %d/%d [%s] - %.1fs - %.0f examples/s (wall) - loss: %.4f%s%s - "
      "val_loss: %.4f%s%s%s%s\n",
      terminal_ ? "\r" : "", r.epoch, epochs, steps, steps, Bar(steps, steps), r.wall_s,
      examples_per_sec, r.loss, AccuracyText(r.accuracy), MetricsText(r.metrics), r.val_loss,
      AccuracyText(r.val_accuracy, "val_"), MetricsText(r.val_metrics, "val_"),
      workers.empty() ? "" : " - workers: ", workers);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

}  // namespace job
}  // namespace psc
