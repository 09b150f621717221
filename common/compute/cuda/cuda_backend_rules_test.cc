// The CUDA backend's rules that need no GPU (label unit): how a convolution
// algorithm is chosen and falls back (algorithm_choice.h), how a window's
// padding is given to cuDNN (conv_padding.h), how host staging memory grows
// and fails (staging_buffer.h, with a fault-injecting allocator), and the
// cuBLAS workspace size (workspace_sizes.h).
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "common/compute/cuda/algorithm_choice.h"
#include "common/compute/cuda/conv_padding.h"
#include "common/compute/cuda/staging_buffer.h"
#include "common/compute/cuda/workspace_sizes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace cuda {
namespace {

using ::testing::HasSubstr;

AlgorithmCandidate Candidate(int algo, bool deterministic, bool fma, size_t workspace,
                             bool supported = true, ConvLayout layout = ConvLayout::kNhwc) {
  AlgorithmCandidate c;
  c.layout = layout;
  c.algo = algo;
  c.supported = supported;
  c.deterministic = deterministic;
  c.fma_math = fma;
  c.workspace = workspace;
  return c;
}

std::vector<int> Algos(const std::vector<AlgorithmCandidate>& cs) {
  std::vector<int> out;
  for (const AlgorithmCandidate& c : cs) out.push_back(c.algo);
  return out;
}

TEST(AlgorithmChoiceTest, KeepsTheRankedOrderOfWhatIsAcceptable) {
  const std::vector<AlgorithmCandidate> ranked = {
      Candidate(6, /*deterministic=*/false, true, 0),    // non-deterministic
      Candidate(1, true, /*fma=*/false, 0),              // TF32 tensor-op math
      Candidate(7, true, true, 0, /*supported=*/false),  // not supported for the shape
      Candidate(5, true, true, size_t{300} << 20),       // over the workspace limit
      Candidate(2, true, true, 4096),
      Candidate(0, true, true, 0),
      Candidate(1, true, true, 0, true, ConvLayout::kNchw),
  };
  EXPECT_EQ(Algos(Acceptable(ranked, /*allow_tf32=*/false, size_t{256} << 20)),
            (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(Acceptable(ranked, false, size_t{256} << 20).back().layout, ConvLayout::kNchw);
  // TF32 allowed: tensor-op math is kept, determinism still required.
  EXPECT_EQ(Algos(Acceptable(ranked, /*allow_tf32=*/true, size_t{256} << 20)),
            (std::vector<int>{1, 2, 0, 1}));
  // The same input gives the same choice: the rule has no state and no clock.
  EXPECT_EQ(Algos(Acceptable(ranked, false, 4096)), Algos(Acceptable(ranked, false, 4096)));
  EXPECT_EQ(Algos(Acceptable(ranked, false, 0)), (std::vector<int>{0, 1}));
}

TEST(AlgorithmChoiceTest, ARefusedWorkspaceOrUnsupportedRunFallsBackToTheNext) {
  std::vector<int> called;
  auto result = FirstThatRuns(
      4,
      [&](int i) {
        called.push_back(i);
        if (i == 0) return absl::ResourceExhaustedError("GPU:0: 200 MiB would exceed the limit");
        if (i == 1) return absl::UnimplementedError("CUDNN_STATUS_NOT_SUPPORTED");
        return absl::OkStatus();
      },
      [](int i) { return std::to_string(i); }, "Conv2D x [4,28,28,1] -> 32");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 2);
  EXPECT_EQ(called, (std::vector<int>{0, 1, 2}));  // 3 is never tried
}

TEST(AlgorithmChoiceTest, AnotherErrorStopsAtOnce) {
  int calls = 0;
  auto result = FirstThatRuns(
      3,
      [&](int) {
        ++calls;
        return absl::InternalError("cudnnConvolutionForward: CUDNN_STATUS_EXECUTION_FAILED");
      },
      [](int i) { return std::to_string(i); }, "Conv2D");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
}

TEST(AlgorithmChoiceTest, NoneRunningNamesEveryAttempt) {
  auto memory = FirstThatRuns(
      2, [](int) { return absl::ResourceExhaustedError("no room"); },
      [](int i) { return "algo " + std::to_string(i); }, "Conv2DBackwardData x [8,7,7,64]");
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(memory.status().message(), HasSubstr("Conv2DBackwardData x [8,7,7,64]"));
  EXPECT_THAT(memory.status().message(), HasSubstr("algo 0: no room; algo 1: no room"));
  auto mixed = FirstThatRuns(
      2,
      [](int i) {
        return i == 0 ? absl::ResourceExhaustedError("no room")
                      : absl::UnimplementedError("not supported");
      },
      [](int i) { return std::to_string(i); }, "Conv2D");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kUnimplemented);
  auto none = FirstThatRuns(
      0, [](int) { return absl::OkStatus(); }, [](int i) { return std::to_string(i); }, "Conv2D");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(none.status().message(), HasSubstr("no acceptable algorithm"));
}

TEST(ConvPaddingTest, SymmetricPaddingIsCudnns) {
  // 3x3/1 "same" on 28: one row and column each side.
  const CudnnPadding same = PlanCudnnPadding(28, 28, 1, 1, 1, 1);
  EXPECT_FALSE(same.explicit_pad);
  EXPECT_EQ(same.pad_h, 1);
  EXPECT_EQ(same.pad_w, 1);
  EXPECT_EQ(same.in_h, 28);
  EXPECT_EQ(same.in_w, 28);
  EXPECT_EQ(CudnnOutput(same.in_h, same.pad_h, 3, 1), 28);
  // "valid" (and "same" with nothing to pad): no padding at all.
  const CudnnPadding valid = PlanCudnnPadding(28, 27, 0, 0, 0, 0);
  EXPECT_FALSE(valid.explicit_pad);
  EXPECT_EQ(valid.pad_h + valid.pad_w + valid.top + valid.bottom + valid.left + valid.right, 0);
  EXPECT_EQ(CudnnOutput(valid.in_w, 0, 2, 2), 13);
}

TEST(ConvPaddingTest, AsymmetricPaddingIsExplicitOnBothAxes) {
  // 3x3/2 "same" on 28 rows: 0 before, 1 after; 27 columns: 1 and 1. One
  // asymmetric axis pads both explicitly, and cuDNN pads nothing.
  const CudnnPadding p = PlanCudnnPadding(28, 27, 0, 1, 1, 1);
  EXPECT_TRUE(p.explicit_pad);
  EXPECT_EQ(p.pad_h, 0);
  EXPECT_EQ(p.pad_w, 0);
  EXPECT_EQ(p.top, 0);
  EXPECT_EQ(p.bottom, 1);
  EXPECT_EQ(p.left, 1);
  EXPECT_EQ(p.right, 1);
  EXPECT_EQ(p.in_h, 29);
  EXPECT_EQ(p.in_w, 29);
  EXPECT_EQ(CudnnOutput(p.in_h, 0, 3, 2), 14);  // ceil(28 / 2)
  EXPECT_EQ(CudnnOutput(p.in_w, 0, 3, 2), 14);  // ceil(27 / 2)
  // Symmetric rows with asymmetric columns: the rows are padded explicitly too.
  const CudnnPadding cols = PlanCudnnPadding(5, 6, 1, 1, 0, 1);
  EXPECT_TRUE(cols.explicit_pad);
  EXPECT_EQ(cols.in_h, 7);
  EXPECT_EQ(cols.in_w, 7);
}

// Host memory from malloc, failing the allocations it is told to.
class FaultyMemory : public HostMemory {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    ++allocations;
    if (fail_next > 0) {
      --fail_next;
      return absl::ResourceExhaustedError("cudaMallocHost: out of memory");
    }
    void* p = std::malloc(bytes);
    live.insert(p);
    return p;
  }
  void Free(void* p) override {
    ASSERT_EQ(live.erase(p), 1u) << "freed twice or never allocated";
    std::free(p);
  }
  int fail_next = 0;
  int allocations = 0;
  std::set<void*> live;
};

TEST(StagingBufferTest, GrowsGeometricallyAndReusesWhatFits) {
  FaultyMemory memory;
  {
    StagingBuffer b(&memory);
    auto p = b.Get(100);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(b.capacity(), StagingBuffer::kMinBytes);
    auto again = b.Get(StagingBuffer::kMinBytes);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *p);
    EXPECT_EQ(memory.allocations, 1);
    ASSERT_TRUE(b.Get(5000).ok());
    EXPECT_EQ(b.capacity(), 2 * StagingBuffer::kMinBytes);
    ASSERT_TRUE(b.Get(100000).ok());
    EXPECT_EQ(b.capacity(), 100000u);
    EXPECT_EQ(memory.live.size(), 1u);
    EXPECT_EQ(b.Get(0).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(memory.live.empty());
}

// The defect this replaced: after a failed growth the buffer kept its old
// capacity with a null pointer, so the next smaller copy wrote through null.
TEST(StagingBufferTest, AFailedGrowthLeavesItEmptyAndTheNextCallRetries) {
  FaultyMemory memory;
  StagingBuffer b(&memory);
  ASSERT_TRUE(b.Get(8192).ok());
  memory.fail_next = 1;
  auto failed = b.Get(20000);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_TRUE(memory.live.empty());
  // A smaller request than the old capacity must allocate again, not reuse.
  auto retried = b.Get(100);
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_NE(*retried, nullptr);
  std::memset(*retried, 1, 100);  // writable
  EXPECT_GE(b.capacity(), 100u);
  StagingBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.data(), *retried);
}

TEST(WorkspaceSizesTest, CublasGets32MiBOnHopper) {
  EXPECT_EQ(CublasWorkspaceBytes(9), size_t{32} << 20);
  EXPECT_EQ(CublasWorkspaceBytes(10), size_t{32} << 20);
  EXPECT_EQ(CublasWorkspaceBytes(8), size_t{4} << 20);
}

}  // namespace
}  // namespace cuda
}  // namespace compute
}  // namespace psc
