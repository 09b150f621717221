#include "common/job/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// What a printer wrote, through open_memstream.
class Captured {
 public:
  Captured() : file_(open_memstream(&buffer_, &size_)) {}
  ~Captured() {
    std::fclose(file_);
    std::free(buffer_);
  }
  FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  FILE* file_;
};

// On a pipe (the launcher's, a log file): a line every 5 s, with the ETA.
TEST(ProgressTest, OffATerminalAProgressLineComesEveryCadence) {
  Captured out;
  base::FakeClock clock;
  ProgressPrinter p(out.file(), /*terminal=*/false, &clock);
  auto step = [&](int64_t s, int seconds) {
    clock.Advance(absl::Seconds(seconds));
    p.Step(1, 3, s, 400, 0.5, 0.8, 1000, absl::Seconds(s / 20));
  };
  step(20, 1);
  step(40, 1);
  EXPECT_EQ(out.text(), "") << "before the first cadence";
  step(100, 4);  // 5 s after the first call
  EXPECT_EQ(out.text(),
            "Epoch 1/3 100/400 - 5s - ETA: 15s - 1000 examples/s - loss: 0.5000 - accuracy: "
            "0.8000\n");
  step(120, 1);
  step(200, 3);  // 4 s after the last line
  step(300, 5);
  const std::string text = out.text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_THAT(text, HasSubstr("Epoch 1/3 300/400 - 15s - ETA: 5s"));
  step(400, 10);  // the epoch's end: its own line follows instead
  const std::string after = out.text();
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 2);
  EXPECT_THAT(after, Not(HasSubstr("\r")));
}

TEST(ProgressTest, OnATerminalTheBarShowsKerasEta) {
  Captured out;
  base::FakeClock clock;
  ProgressPrinter p(out.file(), /*terminal=*/true, &clock);
  p.Step(2, 3, 50, 200, 0.4, 0.9, 1500, absl::Seconds(30));
  EXPECT_THAT(out.text(), HasSubstr("\rEpoch 2/3 50/200 ["));
  EXPECT_THAT(out.text(), HasSubstr("] - ETA: 1:30 - 1500 examples/s"));
  EpochRecord r{2, 0.4, 0.9, 0.5, 0.85, 120.0};
  p.EpochEnd(r, 3, 200, 1400);
  EXPECT_THAT(out.text(), HasSubstr("- 120.0s - 1400 examples/s (wall) - loss: 0.4000"));
}

// The launcher, when its own stdout is a terminal, tells the chief (whose
// stdout is a pipe) to draw the in-place bar.
TEST(ProgressTest, PscProgressOverridesWhetherTheOutputIsATerminal) {
  Captured pipe;  // a memory stream: not a terminal
  unsetenv("PSC_PROGRESS");
  EXPECT_FALSE(ProgressPrinter::DrawsInPlace(pipe.file()));
  setenv("PSC_PROGRESS", "terminal", 1);
  EXPECT_TRUE(ProgressPrinter::DrawsInPlace(pipe.file()));
  setenv("PSC_PROGRESS", "lines", 1);
  EXPECT_FALSE(ProgressPrinter::DrawsInPlace(pipe.file()));
  setenv("PSC_PROGRESS", "terminal", 1);
  ProgressPrinter printer(pipe.file());
  printer.Step(1, 2, 3, 10, 0.5, 0.8, 100, absl::Seconds(1));
  EXPECT_THAT(pipe.text(), ::testing::StartsWith("\rEpoch 1/2 3/10 ["));
  unsetenv("PSC_PROGRESS");
}

// A regression has no accuracy (NaN): its lines leave it out.
TEST(ProgressTest, ARegressionsLinesHaveNoAccuracy) {
  Captured out;
  base::FakeClock clock;
  ProgressPrinter p(out.file(), /*terminal=*/false, &clock);
  const double none = std::nan("");
  p.Step(1, 1, 1, 4, 0.5, none, 100, absl::Seconds(1), {{"mae", 0.25}});
  clock.Advance(absl::Seconds(6));
  p.Step(1, 1, 2, 4, 0.5, none, 100, absl::Seconds(2), {{"mae", 0.25}});
  EpochRecord r;
  r.epoch = 1;
  r.loss = 0.5;
  r.accuracy = none;
  r.val_loss = 0.75;
  r.val_accuracy = none;
  r.metrics = {{"mae", 0.25}};
  r.val_metrics = {{"mae", 0.5}};
  p.EpochEnd(r, 1, 4, 100);
  const std::string text = out.text();
  EXPECT_THAT(text, HasSubstr("loss: 0.5000 - mae: 0.2500\n"));
  EXPECT_THAT(text, HasSubstr("loss: 0.5000 - mae: 0.2500 - val_loss: 0.7500 - val_mae: 0.5000\n"));
  EXPECT_THAT(text, Not(HasSubstr("accuracy")));
  EXPECT_THAT(text, Not(HasSubstr("workers:")));
}

TEST(ProgressTest, AnEpochLineEndsWithTheMembershipOnceItChanged) {
  Captured out;
  base::FakeClock clock;
  ProgressPrinter p(out.file(), /*terminal=*/false, &clock);
  EpochRecord r;
  r.epoch = 2;
  p.EpochEnd(r, 3, 4, 100, "2/3 live, 1 lost, 0 rejoined");
  EXPECT_THAT(out.text(),
              HasSubstr("val_accuracy: 0.0000 - workers: 2/3 live, 1 lost, 0 rejoined\n"));
}

}  // namespace
}  // namespace job
}  // namespace psc
