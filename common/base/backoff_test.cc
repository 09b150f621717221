#include "common/base/backoff.h"

#include "gtest/gtest.h"

namespace psc {
namespace base {
namespace {

TEST(BackoffTest, GrowsGeometricallyUpToTheCap) {
  Backoff b({absl::Milliseconds(100), 2.0, absl::Milliseconds(500), 0.0});
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  EXPECT_EQ(b.Next(), absl::Milliseconds(500));
  EXPECT_EQ(b.Next(), absl::Milliseconds(500));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysInItsBandAndIsDeterministic) {
  BackoffOptions o{absl::Milliseconds(100), 1.0, absl::Seconds(1), 0.25};
  Backoff a(o, 7), b(o, 7);
  for (int i = 0; i < 100; ++i) {
    absl::Duration d = a.Next();
    EXPECT_GE(d, absl::Milliseconds(75));
    EXPECT_LE(d, absl::Milliseconds(125));
    EXPECT_EQ(d, b.Next());
  }
}

}  // namespace
}  // namespace base
}  // namespace psc
