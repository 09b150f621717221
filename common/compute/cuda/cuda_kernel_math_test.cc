// The CUDA kernels' index math (cuda_kernel_math.h) on the host: each test
// runs the same functions the kernels run, over every block and thread of
// the grid the launcher would use, phase by phase as the block barriers
// order them, and compares with the plain reference. Runs without a GPU
// (label unit); the launches themselves are checked only on a GPU.
#include "common/compute/cuda/cuda_kernel_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "common/compute/reference/reference_ops.h"
#include "gtest/gtest.h"

namespace psc {
namespace compute {
namespace cuda {
namespace math {
namespace {

namespace ref = ::psc::compute::reference;

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// BatchedTranspose as cuda_kernels.cu launches it: TransposeGrid's grid
// (row tiles on x, at most max_y column tiles on y, at most max_z matrices
// per launch), blocks of 32 x 8 threads, each block looping over the column
// tiles with the stride of the grid. Small limits exercise the loops.
std::vector<float> Transpose(const std::vector<float>& in, int64_t batch, int64_t rows,
                             int64_t cols, int64_t max_y = kMaxGridYZ, int64_t max_z = kMaxGridYZ) {
  std::vector<float> out(in.size(), -1.0f);
  const Grid g = TransposeGrid(rows, cols, batch, max_y, max_z);
  for (int64_t b0 = 0; b0 < batch; b0 += g.z) {  // the host's launches
    for (int64_t bz = 0; bz < std::min(g.z, batch - b0); ++bz) {
      const float* src = in.data() + (b0 + bz) * rows * cols;
      float* dst = out.data() + (b0 + bz) * rows * cols;
      for (int64_t bx = 0; bx < g.x; ++bx) {
        for (int64_t by = 0; by < g.y; ++by) {
          for (int64_t ct = by; ct < Tiles(cols); ct += g.y) {  // the kernel's loop
            Tile tile;
            for (int ty = 0; ty < kTileRows; ++ty) {
              for (int tx = 0; tx < kTile; ++tx)
                TransposeLoad(src, rows, cols, ct, bx, tx, ty, tile);
            }
            for (int ty = 0; ty < kTileRows; ++ty) {
              for (int tx = 0; tx < kTile; ++tx)
                TransposeStore(dst, rows, cols, ct, bx, tx, ty, tile);
            }
          }
        }
      }
    }
  }
  return out;
}

void ExpectTransposed(const std::vector<float>& in, const std::vector<float>& out, int64_t batch,
                      int64_t rows, int64_t cols) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(out[(b * cols + c) * rows + r], in[(b * rows + r) * cols + c]);
      }
    }
  }
}

TEST(CudaKernelMathTest, TransposeMovesEveryElement) {
  for (auto [batch, rows, cols] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                   {1, 9, 32},
                                   {2, 33, 31},
                                   {3, 784, 17},
                                   {1, 1152, 128},
                                   {4, 5, 70}}) {
    SCOPED_TRACE(testing::Message() << batch << "x" << rows << "x" << cols);
    const std::vector<float> in = Iota(batch * rows * cols);
    ExpectTransposed(in, Transpose(in, batch, rows, cols), batch, rows, cols);
  }
}

// Fewer grid rows and matrices per launch than there are tiles and matrices:
// the kernel's loop and the host's launches still cover every element once.
// (The device's limits are 65,535; rows have none worth the name.)
TEST(CudaKernelMathTest, TransposeCoversMoreTilesThanTheGridHas) {
  for (auto [batch, rows, cols, max_y, max_z] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 40, 200, 2, 1},
        {5, 70, 97, 1, 2},
        {3, 3000, 33, 3, 3}}) {
    SCOPED_TRACE(testing::Message()
                 << batch << "x" << rows << "x" << cols << " grid y " << max_y << " z " << max_z);
    const std::vector<float> in = Iota(batch * rows * cols);
    ExpectTransposed(in, Transpose(in, batch, rows, cols, max_y, max_z), batch, rows, cols);
  }
  // The old limit: more than 65,535 row tiles (a [9C, K] filter with C over
  // 233k, or a tall activation) now goes on x.
  const Grid tall = TransposeGrid(int64_t{65536} * kTile, 10, 1);
  EXPECT_EQ(tall.x, 65536);
  EXPECT_EQ(tall.y, 1);
  const Grid wide = TransposeGrid(10, int64_t{70000} * kTile, 70000);
  EXPECT_EQ(wide.y, kMaxGridYZ);
  EXPECT_EQ(wide.z, kMaxGridYZ);
}

// The filter and activation layout changes of cuda_conv.cc, composed from
// the same BatchedTranspose calls.
TEST(CudaKernelMathTest, ConvLayoutChangesAreTheIntendedPermutations) {
  const int64_t c = 5, k = 7, taps = 9 * c;
  const std::vector<float> hwio = Iota(taps * k);  // [r][s][c][k]
  auto at_hwio = [&](int64_t r, int64_t s, int64_t ci, int64_t ki) {
    return hwio[((r * 3 + s) * c + ci) * k + ki];
  };
  // NHWC filters (KRSC): one transpose of [9C, K].
  const std::vector<float> krsc = Transpose(hwio, 1, taps, k);
  // NCHW filters (KCRS): then per k, [RS, C] -> [C, RS].
  const std::vector<float> kcrs = Transpose(krsc, k, 9, c);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t s = 0; s < 3; ++s) {
      for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t ki = 0; ki < k; ++ki) {
          ASSERT_EQ(krsc[((ki * 3 + r) * 3 + s) * c + ci], at_hwio(r, s, ci, ki));
          ASSERT_EQ(kcrs[((ki * c + ci) * 3 + r) * 3 + s], at_hwio(r, s, ci, ki));
        }
      }
    }
  }
  // And back (FilterOut): KRSC -> HWIO; KCRS -> KRSC -> HWIO.
  EXPECT_EQ(Transpose(krsc, 1, k, taps), hwio);
  EXPECT_EQ(Transpose(Transpose(kcrs, k, c, 9), 1, k, taps), hwio);
  // Activations: NHWC -> NCHW is per image [HW, C] -> [C, HW]; back is the inverse.
  const int64_t n = 3, hw = 12;
  const std::vector<float> nhwc = Iota(n * hw * c);
  const std::vector<float> nchw = Transpose(nhwc, n, hw, c);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t ci = 0; ci < c; ++ci) {
        ASSERT_EQ(nchw[(b * c + ci) * hw + p], nhwc[(b * hw + p) * c + ci]);
      }
    }
  }
  EXPECT_EQ(Transpose(nchw, n, c, hw), nhwc);
}

// ColumnSums as launched: pass 1 on ColumnSumGrid (parts on x, at most max_y
// column tiles on y, each block looping over the rest) of 32 x 8 threads;
// pass 2 a grid-stride loop over the columns on `pass2_threads` threads.
std::vector<float> ColumnSums(const std::vector<float>& in, int64_t rows, int64_t cols,
                              int64_t max_y = kMaxGridYZ, int64_t pass2_threads = 1 << 28) {
  const int parts = ColumnSumParts(rows);
  std::vector<float> partial(static_cast<size_t>(parts) * cols, std::nanf(""));
  const Grid g = ColumnSumGrid(rows, cols, max_y);
  EXPECT_EQ(g.x, parts);
  for (int64_t p = 0; p < g.x; ++p) {
    for (int64_t by = 0; by < g.y; ++by) {
      for (int64_t ct = by; ct < Tiles(cols); ct += g.y) {
        float lanes[kTileRows][kTile];
        for (int ty = 0; ty < kTileRows; ++ty) {
          for (int tx = 0; tx < kTile; ++tx) {
            lanes[ty][tx] = PartLaneSum(in.data(), rows, cols, p, ct * kTile + tx, ty);
          }
        }
        for (int tx = 0; tx < kTile; ++tx) {
          const int64_t col = ct * kTile + tx;
          if (col < cols) partial[p * cols + col] = SumLanes(lanes, tx);
        }
      }
    }
  }
  std::vector<float> out(cols, std::nanf(""));
  for (int64_t t = 0; t < pass2_threads && t < cols; ++t) {
    for (int64_t col = t; col < cols; col += pass2_threads) {
      out[col] = SumParts(partial.data(), parts, cols, col);
    }
  }
  return out;
}

TEST(CudaKernelMathTest, ColumnSumsCoverEveryRowOnce) {
  std::mt19937 rng(3);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {7, 3},
                            {256, 32},
                            {257, 33},
                            {3136, 32},       // seed_cnn's first layers at batch 4
                            {300000, 10}}) {  // more rows than 1024 parts of 256
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    std::vector<float> in(rows * cols);
    // Small integers: every order of summation is exact, so any miss or
    // double count shows.
    for (float& v : in) v = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    const std::vector<float> got = ColumnSums(in, rows, cols);
    for (int64_t c = 0; c < cols; ++c) {
      double want = 0;
      for (int64_t r = 0; r < rows; ++r) want += in[r * cols + c];
      ASSERT_EQ(got[c], want) << "column " << c;
    }
  }
  // Fewer grid rows and threads than column tiles and columns.
  std::vector<float> in(50 * 300);
  for (float& v : in) v = static_cast<float>(static_cast<int>(rng() % 7) - 3);
  const std::vector<float> got = ColumnSums(in, 50, 300, /*max_y=*/2, /*pass2_threads=*/7);
  for (int64_t c = 0; c < 300; ++c) {
    double want = 0;
    for (int64_t r = 0; r < 50; ++r) want += in[r * 300 + c];
    ASSERT_EQ(got[c], want) << "column " << c;
  }
  EXPECT_EQ(ColumnSumParts(1), 1);
  EXPECT_EQ(ColumnSumParts(257), 2);
  EXPECT_EQ(ColumnSumParts(int64_t{1} << 30), kMaxParts);
}

TEST(CudaKernelMathTest, MaxPoolBackwardMatchesTheReferenceWithTies) {
  std::mt19937 rng(5);
  for (auto [n, h, w, c] :
       {std::tuple<int, int, int, int>{1, 2, 2, 1}, {2, 7, 5, 3}, {3, 6, 5, 4}, {4, 28, 28, 32}}) {
    SCOPED_TRACE(testing::Message() << n << "x" << h << "x" << w << "x" << c);
    std::vector<double> x = ref::RandomUniform(&rng, int64_t{n} * h * w * c, 0, 3);
    for (double& v : x) v = std::floor(v);  // three levels: many ties
    const int64_t outputs = int64_t{n} * (h / 2) * (w / 2) * c;
    const std::vector<double> dy = ref::RandomUniform(&rng, outputs, -1, 1);
    const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
    std::vector<float> dx(xf.size(), 0.0f);  // the launcher's memset
    for (int64_t o = 0; o < outputs; ++o) {
      MaxPoolBackwardElement(xf.data(), dyf.data(), dx.data(), h, w, c, o);
    }
    const std::vector<double> want = ref::MaxPool2x2Backward(x, n, h, w, c, dy);
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx[i], static_cast<float>(want[i])) << i;
  }
}

TEST(CudaKernelMathTest, SoftmaxRowsMatchTheReference) {
  std::mt19937 rng(7);
  const int n = 6, m = 10;
  std::vector<double> logits = ref::RandomUniform(&rng, n * m, -5, 5);
  logits[0] = logits[1] = 9;  // a tie for the argmax: the first counts
  std::vector<int32_t> labels = {1, 0, 3, 9, 4, 4};
  const std::vector<float> lf(logits.begin(), logits.end());
  std::vector<float> g(n * m);
  std::vector<double> row_loss(n);
  std::vector<int> row_correct(n);
  for (int64_t i = 0; i < n; ++i) {
    SoftmaxRow(lf.data(), labels.data(), m, 0.5f, i, g.data(), row_loss.data(), row_correct.data());
  }
  auto want =
      ref::SoftmaxCrossEntropy(std::vector<double>(lf.begin(), lf.end()), n, m, labels, 0.5);
  ASSERT_TRUE(want.ok());
  double loss = 0;
  int64_t correct = 0;
  for (int i = 0; i < n; ++i) {
    loss += row_loss[i];
    correct += row_correct[i];
  }
  EXPECT_NEAR(loss, want->loss_sum, 1e-5);  // differences in float, as on the CPU backend
  EXPECT_EQ(correct, want->correct);
  EXPECT_EQ(row_correct[0], 0);  // label 1, argmax 0 (the first of the tie)
  for (int i = 0; i < n * m; ++i) EXPECT_NEAR(g[i], want->dlogits[i], 1e-7) << i;
}

TEST(CudaKernelMathTest, BiasActivation) {
  EXPECT_EQ(BiasActivation(1.5f, -2.0f, false), -0.5f);
  EXPECT_EQ(BiasActivation(1.5f, -2.0f, true), 0.0f);
  EXPECT_EQ(BiasActivation(1.5f, 2.0f, true), 3.5f);
}

}  // namespace
}  // namespace math
}  // namespace cuda
}  // namespace compute
}  // namespace psc

namespace psc {
namespace compute {
namespace cuda {
namespace {

// The activations and their gradients, thread by thread, against the
// double reference (f numbered as compute::Activation).
TEST(CudaKernelMathTest, ActivationsMatchTheReference) {
  std::mt19937 rng(41);
  const std::vector<double> x = reference::RandomUniform(&rng, 200, -3, 3);
  const std::vector<double> dy = reference::RandomUniform(&rng, 200, -1, 1);
  for (int f = 0; f < 4; ++f) {
    const std::vector<double> want = reference::Activate(f, 0.2, x);
    std::vector<double> yf(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float y = math::Activate(f, 0.2f, static_cast<float>(x[i]));
      EXPECT_NEAR(y, want[i], 1e-6 + 1e-6 * std::fabs(want[i])) << "f " << f << " [" << i << "]";
      yf[i] = static_cast<float>(want[i]);
    }
    const std::vector<double> want_dx = reference::ActivateBackward(f, 0.2, yf, dy);
    for (size_t i = 0; i < x.size(); ++i) {
      const float dx =
          math::ActivateGradient(f, 0.2f, static_cast<float>(yf[i]), static_cast<float>(dy[i]));
      EXPECT_NEAR(dx, want_dx[i], 1e-6 + 1e-6 * std::fabs(want_dx[i])) << "f " << f;
    }
  }
}

// Every output and input element of a global pool, as the kernels' grids
// visit them, against the reference (max with ties: the first wins).
TEST(CudaKernelMathTest, GlobalPoolingMatchesTheReference) {
  std::mt19937 rng(42);
  const int n = 3, h = 4, w = 5, c = 6;
  std::vector<double> x = reference::RandomUniform(&rng, n * h * w * c, -1, 1);
  for (int i = 0; i < n * h * w * c; i += 7) x[i] = 0.5;  // ties
  const std::vector<double> dy = reference::RandomUniform(&rng, n * c, -1, 1);
  const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
  std::vector<double> xd(xf.begin(), xf.end()), dyd(dyf.begin(), dyf.end());
  for (bool max : {false, true}) {
    const std::vector<double> y = reference::GlobalPool(max, xd, n, h, w, c);
    for (int o = 0; o < n * c; ++o) {
      EXPECT_NEAR(math::GlobalPoolElement(xf.data(), h * w, c, max, o), y[o], 1e-6) << o;
    }
    const std::vector<double> dx = reference::GlobalPoolBackward(max, xd, n, h, w, c, dyd);
    for (int e = 0; e < n * h * w * c; ++e) {
      EXPECT_NEAR(math::GlobalPoolGradient(xf.data(), dyf.data(), h * w, c, max, e), dx[e], 1e-7)
          << (max ? "max " : "average ") << e;
    }
  }
}

// The 2x2 average pool, every output and input element, odd sizes too.
TEST(CudaKernelMathTest, AvgPoolMatchesTheReference) {
  std::mt19937 rng(43);
  for (auto [n, h, w, c] :
       {std::tuple<int, int, int, int>{1, 2, 2, 1}, {2, 7, 5, 3}, {3, 6, 9, 4}}) {
    const std::vector<double> x = reference::RandomUniform(&rng, int64_t{n} * h * w * c, -1, 1);
    const std::vector<float> xf(x.begin(), x.end());
    const std::vector<double> xd(xf.begin(), xf.end());
    const std::vector<double> y = reference::AvgPool2x2(xd, n, h, w, c);
    for (size_t o = 0; o < y.size(); ++o) {
      EXPECT_NEAR(math::AvgPoolElement(xf.data(), h, w, c, static_cast<int64_t>(o)), y[o], 1e-6);
    }
    const std::vector<double> dy = reference::RandomUniform(&rng, y.size(), -1, 1);
    const std::vector<float> dyf(dy.begin(), dy.end());
    const std::vector<double> dx =
        reference::AvgPool2x2Backward(n, h, w, c, std::vector<double>(dyf.begin(), dyf.end()));
    for (size_t e = 0; e < dx.size(); ++e) {
      ASSERT_EQ(math::AvgPoolGradient(dyf.data(), h, w, c, static_cast<int64_t>(e)),
                static_cast<float>(dx[e]))
          << e;
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace compute
}  // namespace psc
