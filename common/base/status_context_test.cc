#include "common/base/status_context.h"

#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace psc {
namespace base {
namespace {

TEST(PrefixTest, KeepsTheCodeAndPayloadsAndPutsTheContextFirst) {
  absl::Status device = absl::ResourceExhaustedError("GPU:0: out of memory");
  device.SetPayload("psc/test", absl::Cord("x"));
  const absl::Status s = Prefix(device, "conv2d/kernel");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "conv2d/kernel: GPU:0: out of memory");
  ASSERT_TRUE(s.GetPayload("psc/test").has_value());
  EXPECT_EQ(*s.GetPayload("psc/test"), "x");
  EXPECT_EQ(Prefix(absl::UnavailableError("gone"), "ps:1").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Prefix(absl::InternalError("cudaMemcpy"), "a").code(), absl::StatusCode::kInternal);
}

TEST(PrefixTest, OkStaysOk) { EXPECT_TRUE(Prefix(absl::OkStatus(), "anything").ok()); }

}  // namespace
}  // namespace base
}  // namespace psc
