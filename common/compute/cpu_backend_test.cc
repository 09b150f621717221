// The CPU backend against the plain double-precision reference: every op,
// random and seed_cnn shapes, finite differences (backend_conformance.cc).
#include "common/compute/cpu_backend.h"

#include "common/compute/backend_conformance.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace {

INSTANTIATE_TEST_SUITE_P(Cpu, BackendConformanceTest,
                         ::testing::Values(BackendFactory{"cpu", [] { return CreateCpuBackend(2); },
                                                          /*must_support_all=*/true}),
                         BackendFactoryName);

TEST(CpuBackendTest, ThreadsAreSetAndValidated) {
  ASSERT_TRUE(CreateCpuBackend(1).ok());
  EXPECT_EQ(CpuBackendThreads(), 1);
  ASSERT_TRUE(CreateCpuBackend(2).ok());
  EXPECT_EQ(CpuBackendThreads(), 2);
  EXPECT_EQ(CreateCpuBackend(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace compute
}  // namespace psc
