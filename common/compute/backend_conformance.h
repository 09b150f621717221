// The cross-backend conformance suite: every op of backend.h on a backend,
// in float32, against the double-precision reference (reference_ops.h) on
// random shapes and on the seed_cnn shapes; the backward ops against central
// differences of the reference forward; the contract's error codes, ReLU
// backward in place, and bit-reproducible weight gradients. The ops in the
// kernel registry (kernel_registry.h) have no test each: one loop runs every
// kernel the backend registered on its OpDef's cases (common/ops/op_def.h),
// in place where the OpDef allows, and refuses its wrong shapes and counts
// (RegisteredKernels*); the OpDefs' gradient references are checked against
// central differences once, in common/ops/op_def_test.cc.
//
// The TEST_Ps live in backend_conformance.cc; a backend's test binary compiles
// that file in and instantiates the suite once, e.g. in cpu_backend_test.cc:
//
//   #include "common/compute/backend_conformance.h"
//   #include "common/compute/cpu_backend.h"
//
//   namespace psc {
//   namespace compute {
//   namespace {
//
//   INSTANTIATE_TEST_SUITE_P(
//       Cpu, BackendConformanceTest,
//       ::testing::Values(BackendFactory{"cpu", [] { return CreateCpuBackend(2); },
//                                        /*must_support_all=*/true}),
//       BackendFactoryName);
//
//   }  // namespace
//   }  // namespace compute
//   }  // namespace psc
//
// (INSTANTIATE_TEST_SUITE_P pastes the suite name into identifiers, so it
// must name BackendConformanceTest unqualified: instantiate inside
// psc::compute, or after `using ::psc::compute::BackendConformanceTest;`.)
//
// Tolerances. Inputs are uniform in [-1, 1] and rounded to float, so the
// reference sees exactly what the backend sees. An output that sums L products
// is compared as |got - want| <= 1e-5 * sqrt(L) + 1e-4 * |want|. A sequential
// float32 sum of L such terms errs by about 1e-8 * L (one standard deviation),
// so the bound holds with a wide margin up to the largest seed_cnn reduction
// (L = 3136 in the first layers' weight gradients: 3e-5 against 5.6e-4), and
// blocked or tree sums err far less; an index or layout bug errs by O(1).
// Gradients are checked the same way against central differences of the
// reference forward (exact up to ~1e-12 for these piecewise-linear ops).
// ReLU backward and max pooling move values without arithmetic and must
// match exactly.
//
// Capability. A case whose OpSpec the backend does not Support is skipped
// (its op and shapes printed; the whole test is GTEST_SKIPped if no case ran)
// unless the factory says must_support_all, which makes it a failure.
#ifndef PSC_COMMON_COMPUTE_BACKEND_CONFORMANCE_H_
#define PSC_COMMON_COMPUTE_BACKEND_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {

// How the suite gets a fresh backend for each test.
struct BackendFactory {
  // The instantiation's name in test names: letters, digits and underscores.
  std::string name;
  // Called once per test. UNAVAILABLE (no device) skips the test unless
  // must_support_all; any other error fails it.
  std::function<absl::StatusOr<std::unique_ptr<ComputeBackend>>()> make;
  // Whether the backend must support every op at every shape the suite uses
  // (true for the CPU backend, which soft placement falls back on).
  bool must_support_all = false;
};

// For gtest's messages and test names.
void PrintTo(const BackendFactory& factory, std::ostream* os);
std::string BackendFactoryName(const ::testing::TestParamInfo<BackendFactory>& info);

// Thread-compatible, as backends are.
class BackendConformanceTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override;

  // Whether the backend supports `spec`. If not, records the skipped case, or
  // with must_support_all adds a failure; either way the caller skips it.
  bool Supported(const OpSpec& spec);
  // Ends a test that checked cases one by one: GTEST_SKIPs it if every case
  // was skipped as unsupported.
  void SkipIfNothingRan();

  std::unique_ptr<ComputeBackend> backend_;

 private:
  int cases_run_ = 0;
  std::vector<std::string> skipped_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_BACKEND_CONFORMANCE_H_
