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
  EXPECT_EQ(registry.Register("A", 33, 1, Returns(absl::StatusCode::kOk)).code(), invalid);
  EXPECT_EQ(registry.Register("A", 2, 1, Returns(absl::StatusCode::kOk), {0b100, 0}).code(),
            invalid)
      << "an optional third input of two";
  EXPECT_EQ(registry.Register("A", 2, 1, Returns(absl::StatusCode::kOk), {0, 0b10}).code(), invalid)
      << "an optional second output of one";
  EXPECT_TRUE(registry.Names().empty());
}

struct Counter {
  int runs = 0;
};

absl::Status CountRun(Counter& c, absl::Span<const DeviceTensor* const>, const OpAttrs&,
                      absl::Span<DeviceTensor* const>) {
  ++c.runs;
  return absl::OkStatus();
}

bool WideInputs(const OpSpec& spec) { return spec.input.size() == 2 && spec.input[1] > 4; }

// A table registers each entry bound to its context, with its optional
// tensors and what it accepts, and stops at the first refusal.
TEST(KernelRegistryTest, RegisterKernelsBindsATableToItsContext) {
  Counter counter;
  KernelRegistry registry;
  static constexpr KernelEntry<Counter> kTable[] = {
      {"One", 1, 1, CountRun},
      {"Two", 2, 2, CountRun, {0b10, 0b10}, WideInputs},
  };
  ASSERT_TRUE(RegisterKernels<Counter>(&counter, kTable, &registry).ok());
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"One", "Two"}));
  EXPECT_EQ(registry.Find("Two")->optional.inputs, 0b10u);
  EXPECT_EQ(registry.Find("Two")->optional.outputs, 0b10u);
  EXPECT_EQ(registry.Find("One")->accepts, nullptr);
  ASSERT_EQ(registry.Find("Two")->accepts, WideInputs);
  ASSERT_TRUE(registry.Find("One")->run({}, OpAttrs(), {}).ok());
  ASSERT_TRUE(registry.Find("Two")->run({}, OpAttrs(), {}).ok());
  EXPECT_EQ(counter.runs, 2);
  static constexpr KernelEntry<Counter> kAgain[] = {
      {"Three", 1, 1, CountRun}, {"One", 1, 1, CountRun}, {"Four", 1, 1, CountRun}};
  EXPECT_EQ(RegisterKernels<Counter>(&counter, kAgain, &registry).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"One", "Three", "Two"}));
}

}  // namespace
}  // namespace compute
}  // namespace psc
