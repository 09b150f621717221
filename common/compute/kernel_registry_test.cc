#include "common/compute/kernel_registry.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

Kernel Returns(absl::StatusCode code) {
  return [code](absl::Span<const DeviceTensor* const>, const OpAttrs&,
                absl::Span<DeviceTensor* const>) { return absl::Status(code, "kernel ran"); };
}

TEST(KernelRegistryTest, FindsWhatWasRegisteredAndListsItInNameOrder) {
  KernelRegistry registry;
  EXPECT_EQ(registry.Find("Add"), nullptr);
  ASSERT_TRUE(registry.Register("Scale", 1, 1, Returns(absl::StatusCode::kAborted)).ok());
  ASSERT_TRUE(registry.Register("Add", 2, 1, Returns(absl::StatusCode::kDataLoss)).ok());
  const RegisteredKernel* add = registry.Find("Add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->inputs, 2);
  EXPECT_EQ(add->outputs, 1);
  EXPECT_EQ(add->run({}, OpAttrs(), {}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(registry.Find("Scale")->run({}, OpAttrs(), {}).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(registry.Find("add"), nullptr) << "names are case-sensitive";
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"Add", "Scale"}));
}

TEST(KernelRegistryTest, RefusesASecondKernelForAnOpAndKeepsTheFirst) {
  KernelRegistry registry;
  ASSERT_TRUE(registry.Register("Add", 2, 1, Returns(absl::StatusCode::kDataLoss)).ok());
  const absl::Status again = registry.Register("Add", 2, 1, Returns(absl::StatusCode::kAborted));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(registry.Find("Add")->run({}, OpAttrs(), {}).code(), absl::StatusCode::kDataLoss);
}

TEST(KernelRegistryTest, RefusesAnUnnamedOpBadCountsAndNoKernel) {
  KernelRegistry registry;
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(registry.Register("", 1, 1, Returns(absl::StatusCode::kOk)).code(), invalid);
  EXPECT_EQ(registry.Register("A", -1, 1, Returns(absl::StatusCode::kOk)).code(), invalid);
  EXPECT_EQ(registry.Register("A", 1, 0, Returns(absl::StatusCode::kOk)).code(), invalid);
  EXPECT_EQ(registry.Register("A", 1, 1, Kernel()).code(), invalid);
  EXPECT_TRUE(registry.Names().empty());
}

}  // namespace
}  // namespace compute
}  // namespace psc
