// The CUDA kernels' index math (cuda_kernel_math.h) on the host: each test
// runs the same functions the kernels run, over every block and thread of
// the grid the launcher would use, phase by phase as the block barriers
// order them, and compares with the plain reference; and the explicit
// padding of asymmetric "same" convolutions (conv_padding.h, PadElement,
// CropElement) as a decomposition of the reference's own convolution. Runs
// without a GPU (label unit); the launches themselves are checked only on a
// GPU.
#include "common/compute/cuda/cuda_kernel_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/compute/cuda/conv_padding.h"
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
// the same BatchedTranspose calls, for square and non-square kernels.
TEST(CudaKernelMathTest, ConvLayoutChangesAreTheIntendedPermutations) {
  for (const auto& kernel : {std::pair<int64_t, int64_t>{3, 3}, {1, 3}, {5, 2}}) {
    // Named copies, not a structured binding: clang 14 cannot capture one.
    const int64_t kh = kernel.first, kw = kernel.second;
    SCOPED_TRACE(testing::Message() << kh << "x" << kw);
    const int64_t c = 5, k = 7, spatial = kh * kw, taps = spatial * c;
    const std::vector<float> hwio = Iota(taps * k);  // [r][s][c][k]
    auto at_hwio = [&](int64_t r, int64_t s, int64_t ci, int64_t ki) {
      return hwio[((r * kw + s) * c + ci) * k + ki];
    };
    // NHWC filters (KRSC): one transpose of [RSC, K].
    const std::vector<float> krsc = Transpose(hwio, 1, taps, k);
    // NCHW filters (KCRS): then per k, [RS, C] -> [C, RS].
    const std::vector<float> kcrs = Transpose(krsc, k, spatial, c);
    for (int64_t r = 0; r < kh; ++r) {
      for (int64_t s = 0; s < kw; ++s) {
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t ki = 0; ki < k; ++ki) {
            ASSERT_EQ(krsc[((ki * kh + r) * kw + s) * c + ci], at_hwio(r, s, ci, ki));
            ASSERT_EQ(kcrs[((ki * c + ci) * kh + r) * kw + s], at_hwio(r, s, ci, ki));
          }
        }
      }
    }
    // And back (FilterOut): KRSC -> HWIO; KCRS -> KRSC -> HWIO.
    EXPECT_EQ(Transpose(krsc, 1, k, taps), hwio);
    EXPECT_EQ(Transpose(Transpose(kcrs, k, c, spatial), 1, k, taps), hwio);
  }
  // Activations: NHWC -> NCHW is per image [HW, C] -> [C, HW]; back is the inverse.
  const int64_t n = 3, hw = 12, c = 5;
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

// ---- Windows ----

struct PoolCase {
  int n, h, w, c;
  ref::Window2D win;
};

std::string Describe(const PoolCase& p) {
  return std::to_string(p.n) + "x" + std::to_string(p.h) + "x" + std::to_string(p.w) + "x" +
         std::to_string(p.c) + " window " + std::to_string(p.win.kh) + "x" +
         std::to_string(p.win.kw) + "/" + std::to_string(p.win.sh) + "x" +
         std::to_string(p.win.sw) + (p.win.same ? " same" : " valid");
}

// The windows the kernels must handle: Keras's default 2x2/2 valid (even
// and odd sizes, the floor cutting off a row and column), overlapping 3x3/2
// "same" with odd (symmetric padding) and even (0 before, 1 after) inputs,
// 3x3/1 "same", 2x2/1 valid, non-square 1x3/2x1, "same" 2x2/2 on an odd
// input (the last window half outside), strides larger than the window
// (inputs no window reads), and a window larger than the input.
const std::vector<PoolCase>& PoolCases() {
  static const std::vector<PoolCase> cases = {
      {2, 6, 6, 3, {2, 2, 2, 2, false}}, {2, 7, 5, 3, {2, 2, 2, 2, false}},
      {2, 7, 7, 2, {3, 3, 2, 2, true}},  {2, 8, 8, 2, {3, 3, 2, 2, true}},
      {1, 8, 7, 3, {3, 3, 2, 2, true}},  {2, 6, 5, 2, {3, 3, 1, 1, true}},
      {2, 5, 6, 3, {2, 2, 1, 1, false}}, {2, 7, 6, 2, {1, 3, 2, 1, false}},
      {2, 5, 5, 2, {2, 2, 2, 2, true}},  {1, 7, 7, 2, {1, 1, 3, 3, true}},
      {1, 8, 9, 2, {2, 2, 3, 3, false}}, {1, 3, 3, 2, {5, 5, 1, 1, true}},
      {2, 9, 8, 3, {3, 3, 2, 2, false}}, {1, 28, 28, 4, {2, 2, 2, 2, false}},
  };
  return cases;
}

// The geometry the backend fills from backend.h's Window, here from the
// reference's own statement of Keras's rule.
PoolGeometry GeometryOf(const PoolCase& p) {
  int oh = 0, ow = 0, top = 0, left = 0;
  ref::Extent(p.h, p.win.kh, p.win.sh, p.win.same, &oh, &top);
  ref::Extent(p.w, p.win.kw, p.win.sw, p.win.same, &ow, &left);
  return {p.n, p.h, p.w, p.c, oh, ow, p.win.kh, p.win.kw, p.win.sh, p.win.sw, top, left};
}

// WindowOutputs is the inverse of WindowInputs: output o's window covers
// input i exactly when o is in i's range, on every small geometry.
TEST(CudaKernelMathTest, WindowOutputsInvertWindowInputs) {
  for (int in = 1; in <= 12; ++in) {
    for (int size = 1; size <= 6; ++size) {
      for (int stride = 1; stride <= 4; ++stride) {
        for (bool same : {false, true}) {
          int out = 0, before = 0;
          ref::Extent(in, size, stride, same, &out, &before);
          for (int64_t o = 0; o < out; ++o) {
            int64_t lo = 0, hi = 0;
            WindowInputs(o, size, stride, before, in, &lo, &hi);
            ASSERT_LT(lo, hi) << "every window holds an input element";
          }
          for (int64_t i = 0; i < in; ++i) {
            int64_t lo = 0, hi = 0;
            WindowOutputs(i, size, stride, before, out, &lo, &hi);
            for (int64_t o = 0; o < out; ++o) {
              int64_t a = 0, b = 0;
              WindowInputs(o, size, stride, before, in, &a, &b);
              ASSERT_EQ(a <= i && i < b, lo <= o && o < hi)
                  << "in " << in << " size " << size << " stride " << stride
                  << (same ? " same" : " valid") << ": input " << i << ", output " << o;
            }
          }
        }
      }
    }
  }
}

// Max pooling, forward and the gathered backward, every output and input
// element, against the reference, on three levels of input (many ties: the
// first maximum in row-major window order must win) and integer gradients
// (every float sum exact, so the routing must match exactly).
TEST(CudaKernelMathTest, MaxPoolMatchesTheReferenceWithTies) {
  std::mt19937 rng(5);
  for (const PoolCase& p : PoolCases()) {
    SCOPED_TRACE(Describe(p));
    const PoolGeometry g = GeometryOf(p);
    std::vector<double> x = ref::RandomUniform(&rng, int64_t{p.n} * p.h * p.w * p.c, 0, 3);
    for (double& v : x) v = std::floor(v);
    const int64_t outputs = g.n * g.oh * g.ow * g.c;
    std::vector<double> dy = ref::RandomUniform(&rng, outputs, -8, 8);
    for (double& v : dy) v = std::floor(v);
    const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());

    const std::vector<double> y = ref::MaxPool(x, p.n, p.h, p.w, p.c, p.win);
    ASSERT_EQ(static_cast<int64_t>(y.size()), outputs);
    std::vector<int32_t> argmax(outputs);
    for (int64_t o = 0; o < outputs; ++o) {  // the argmax kernel
      ASSERT_EQ(MaxPoolElement(xf.data(), g, o), static_cast<float>(y[o])) << o;
      argmax[o] = static_cast<int32_t>(MaxPoolArgmax(xf.data(), g, o));
    }
    const std::vector<double> want = ref::MaxPoolBackward(x, p.n, p.h, p.w, p.c, dy, p.win);
    for (int64_t e = 0; e < static_cast<int64_t>(xf.size()); ++e) {  // the gather kernel
      ASSERT_EQ(MaxPoolGradient(argmax.data(), dyf.data(), g, e), static_cast<float>(want[e])) << e;
    }
  }
}

// Average pooling over the same windows: the mean of each window's
// elements inside x, and the gathered gradient (dy / count summed over the
// windows that hold an element).
TEST(CudaKernelMathTest, AvgPoolMatchesTheReference) {
  std::mt19937 rng(43);
  for (const PoolCase& p : PoolCases()) {
    SCOPED_TRACE(Describe(p));
    const PoolGeometry g = GeometryOf(p);
    const std::vector<double> x = ref::RandomUniform(&rng, int64_t{p.n} * p.h * p.w * p.c, -1, 1);
    const std::vector<float> xf(x.begin(), x.end());
    const std::vector<double> y = ref::AvgPool(x, p.n, p.h, p.w, p.c, p.win);
    ASSERT_EQ(static_cast<int64_t>(y.size()), g.n * g.oh * g.ow * g.c);
    for (int64_t o = 0; o < static_cast<int64_t>(y.size()); ++o) {
      ASSERT_NEAR(AvgPoolElement(xf.data(), g, o), y[o], 1e-6) << o;
    }
    const std::vector<double> dy = ref::RandomUniform(&rng, y.size(), -1, 1);
    const std::vector<float> dyf(dy.begin(), dy.end());
    const std::vector<double> dx = ref::AvgPoolBackward(p.n, p.h, p.w, p.c, dy, p.win);
    for (int64_t e = 0; e < static_cast<int64_t>(dx.size()); ++e) {
      ASSERT_NEAR(AvgPoolGradient(dyf.data(), g, e), dx[e], 1e-6) << e;
    }
  }
  // A corner of a "same" window counts only what is inside: 3x3/1 on 2x2,
  // every window holds the four elements.
  const std::vector<float> four = {1, 2, 3, 6};
  const PoolGeometry g{1, 2, 2, 1, 2, 2, 3, 3, 1, 1, 1, 1};
  for (int64_t o = 0; o < 4; ++o) EXPECT_EQ(AvgPoolElement(four.data(), g, o), 3.0f);
}

// ---- The explicit padding of convolutions (conv_padding.h) ----

// Keras's "same" padding of one axis: (out, before, after).
std::tuple<int, int, int> SamePadding(int in, int size, int stride) {
  int out = 0, before = 0;
  ref::Extent(in, size, stride, /*same=*/true, &out, &before);
  const int total = std::max((out - 1) * stride + size - in, 0);
  return {out, before, total - before};
}

TEST(CudaKernelMathTest, PadThenCropIsTheIdentityWithZerosAround) {
  const PadGeometry g{2, 3, 4, 2, 3 + 1 + 2, 4 + 0 + 1, 1, 0};
  const std::vector<float> x = Iota(g.n * g.h * g.w * g.c);
  std::vector<float> xp(g.n * g.hp * g.wp * g.c);
  for (int64_t e = 0; e < static_cast<int64_t>(xp.size()); ++e) xp[e] = PadElement(x.data(), g, e);
  double inside = 0;
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t py = 0; py < g.hp; ++py) {
      for (int64_t px = 0; px < g.wp; ++px) {
        for (int64_t ch = 0; ch < g.c; ++ch) {
          const float v = xp[((b * g.hp + py) * g.wp + px) * g.c + ch];
          const bool in = py >= g.top && py < g.top + g.h && px >= g.left && px < g.left + g.w;
          if (in) {
            inside += v;
          } else {
            ASSERT_EQ(v, 0.0f) << py << "," << px;
          }
        }
      }
    }
  }
  EXPECT_EQ(inside, static_cast<double>(x.size()) * (x.size() - 1) / 2);
  std::vector<float> back(x.size(), -1.0f);
  for (int64_t e = 0; e < static_cast<int64_t>(back.size()); ++e) {
    back[e] = CropElement(xp.data(), g, e);
  }
  EXPECT_EQ(back, x);
}

// cuda_conv.cc's decomposition of an asymmetric "same" convolution: pad x
// explicitly (PlanCudnnPadding, PadElement), run the unpadded ("valid")
// convolution cuDNN runs, and for the data gradient crop (CropElement).
// Against the reference's own "same" convolution, in all three directions.
// The padded sums only add zero terms, so they match exactly.
TEST(CudaKernelMathTest, ExplicitPaddingDecomposesAsymmetricSameConvolutions) {
  std::mt19937 rng(11);
  struct Case {
    int n, h, w, c, k;
    ref::Window2D win;
  };
  for (const Case& t : {Case{2, 8, 8, 3, 4, {3, 3, 2, 2, true}},     // 0 before, 1 after
                        Case{2, 28, 9, 2, 3, {3, 3, 2, 2, true}},    // rows asymmetric only
                        Case{1, 5, 6, 2, 2, {2, 2, 1, 1, true}},     // 0 / 1 at stride 1
                        Case{2, 6, 7, 3, 2, {4, 4, 1, 1, true}},     // 1 / 2
                        Case{1, 7, 6, 2, 3, {1, 2, 1, 2, true}},     // non-square
                        Case{2, 7, 7, 2, 3, {3, 3, 1, 1, true}}}) {  // symmetric: cuDNN pads
    SCOPED_TRACE(testing::Message() << t.h << "x" << t.w << " kernel " << t.win.kh << "x"
                                    << t.win.kw << "/" << t.win.sh << "x" << t.win.sw);
    const auto [oh, top, bottom] = SamePadding(t.h, t.win.kh, t.win.sh);
    const auto [ow, left, right] = SamePadding(t.w, t.win.kw, t.win.sw);
    const CudnnPadding p = PlanCudnnPadding(t.h, t.w, top, bottom, left, right);
    if (!p.explicit_pad) {
      EXPECT_EQ(top, bottom);
      EXPECT_EQ(left, right);
      EXPECT_EQ(CudnnOutput(p.in_h, p.pad_h, t.win.kh, t.win.sh), oh);
      EXPECT_EQ(CudnnOutput(p.in_w, p.pad_w, t.win.kw, t.win.sw), ow);
      continue;
    }
    ASSERT_EQ(p.pad_h, 0);
    ASSERT_EQ(p.pad_w, 0);
    ASSERT_EQ(CudnnOutput(p.in_h, 0, t.win.kh, t.win.sh), oh);
    ASSERT_EQ(CudnnOutput(p.in_w, 0, t.win.kw, t.win.sw), ow);
    const int hp = static_cast<int>(p.in_h), wp = static_cast<int>(p.in_w);
    const PadGeometry g{t.n, t.h, t.w, t.c, hp, wp, p.top, p.left};
    const ref::Window2D valid{t.win.kh, t.win.kw, t.win.sh, t.win.sw, /*same=*/false};

    const std::vector<double> x = ref::RandomUniform(&rng, int64_t{t.n} * t.h * t.w * t.c, -1, 1);
    const std::vector<double> k =
        ref::RandomUniform(&rng, int64_t{t.win.kh} * t.win.kw * t.c * t.k, -1, 1);
    const std::vector<double> dy = ref::RandomUniform(&rng, int64_t{t.n} * oh * ow * t.k, -1, 1);
    const std::vector<float> xf(x.begin(), x.end());
    std::vector<double> xp(int64_t{t.n} * hp * wp * t.c);
    for (int64_t e = 0; e < static_cast<int64_t>(xp.size()); ++e)
      xp[e] = PadElement(xf.data(), g, e);

    EXPECT_EQ(ref::Conv2D(xp, t.n, hp, wp, t.c, k, {}, t.k, valid, false),
              ref::Conv2D(x, t.n, t.h, t.w, t.c, k, {}, t.k, t.win, false));
    EXPECT_EQ(ref::Conv2DBackwardWeights(xp, t.n, hp, wp, t.c, dy, t.k, valid).dw,
              ref::Conv2DBackwardWeights(x, t.n, t.h, t.w, t.c, dy, t.k, t.win).dw);
    const std::vector<double> dxp = ref::Conv2DBackwardData(dy, t.n, hp, wp, t.k, k, t.c, valid);
    const std::vector<double> want = ref::Conv2DBackwardData(dy, t.n, t.h, t.w, t.k, k, t.c, t.win);
    // CropElement on float: the reference's values rounded, compared as such.
    const std::vector<float> dxpf(dxp.begin(), dxp.end());
    for (int64_t e = 0; e < static_cast<int64_t>(want.size()); ++e) {
      ASSERT_EQ(CropElement(dxpf.data(), g, e), static_cast<float>(want[e])) << e;
    }
  }
}

// ---- Batch normalization ----

// One of the batch-norm column reductions as cuda_kernels.cu launches it:
// pass 1 on ColumnSumGrid (parts on x, column tiles on y) of 32 x 8
// threads, phase by phase; pass 2 each column's parts in order.
std::vector<BnSums> BnReduce(int kind, const BnInputs& in, int64_t rows, int64_t cols,
                             int64_t max_y = kMaxGridYZ) {
  const int parts = ColumnSumParts(rows);
  std::vector<BnSums> partial(static_cast<size_t>(parts) * cols,
                              BnSums{std::nan(""), std::nan("")});
  const Grid g = ColumnSumGrid(rows, cols, max_y);
  for (int64_t p = 0; p < g.x; ++p) {
    for (int64_t by = 0; by < g.y; ++by) {
      for (int64_t ct = by; ct < Tiles(cols); ct += g.y) {
        BnSums lanes[kTileRows][kTile];
        for (int ty = 0; ty < kTileRows; ++ty) {
          for (int tx = 0; tx < kTile; ++tx) {
            lanes[ty][tx] = BnPartLaneSum(kind, in, rows, cols, p, ct * kTile + tx, ty);
          }
        }
        for (int tx = 0; tx < kTile; ++tx) {
          const int64_t col = ct * kTile + tx;
          if (col < cols) partial[p * cols + col] = BnSumLanes(lanes, tx);
        }
      }
    }
  }
  std::vector<BnSums> out(cols);
  for (int64_t c = 0; c < cols; ++c) out[c] = BnSumParts(partial.data(), parts, cols, c);
  return out;
}

TEST(CudaKernelMathTest, BatchNormMatchesTheReference) {
  std::mt19937 rng(17);
  const float epsilon = 1e-3f;
  for (auto [rows, c, max_y] : {std::tuple<int64_t, int, int64_t>{1, 1, kMaxGridYZ},
                                {7, 3, kMaxGridYZ},
                                {300, 5, kMaxGridYZ},
                                {3136, 32, kMaxGridYZ},      // seed_cnn's first layers, batch 4
                                {2000, 70, 1},               // fewer grid rows than column tiles
                                {300000, 2, kMaxGridYZ}}) {  // more rows than 1024 parts of 256
    SCOPED_TRACE(testing::Message() << rows << "x" << c);
    std::vector<double> x = ref::RandomUniform(&rng, rows * c, -1, 1);
    // Channel ch is offset by ch / 2 (means away from 0, as after a ReLU;
    // float32 statistics of larger offsets err by the mean's rounding, over
    // these tolerances), and the last one is constant (variance 0) where
    // there are several.
    for (int64_t i = 0; i < rows * c; ++i) {
      const int ch = static_cast<int>(i % c);
      x[i] = (c > 1 && ch == c - 1) ? 0.75 : x[i] + 0.5 * ch;
    }
    const std::vector<double> gamma = ref::RandomUniform(&rng, c, 0.5, 1.5);
    const std::vector<double> beta = ref::RandomUniform(&rng, c, -1, 1);
    const std::vector<double> dy = ref::RandomUniform(&rng, rows * c, -1, 1);
    const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
    const std::vector<float> gf(gamma.begin(), gamma.end()), bf(beta.begin(), beta.end());
    const ref::BatchNormResult want = ref::BatchNorm(x, rows, c, gamma, beta, epsilon);

    // The statistics: two reductions, then the normalization.
    BnInputs in{xf.data(), nullptr, nullptr, nullptr, 0.0f};
    std::vector<float> mean(c), variance(c);
    const std::vector<BnSums> sums = BnReduce(kBnSumX, in, rows, c, max_y);
    for (int ch = 0; ch < c; ++ch) mean[ch] = BnAverage(sums[ch], rows);
    in.mean = mean.data();
    const std::vector<BnSums> squares = BnReduce(kBnSumSquaredDeviation, in, rows, c, max_y);
    for (int ch = 0; ch < c; ++ch) {
      variance[ch] = BnAverage(squares[ch], rows);
      EXPECT_NEAR(mean[ch], want.mean[ch], 1e-6 * (1 + std::fabs(want.mean[ch]))) << ch;
      EXPECT_NEAR(variance[ch], want.variance[ch], 1e-6 * (1 + want.variance[ch])) << ch;
    }
    if (c > 1) {
      EXPECT_EQ(variance[c - 1], 0.0f);
    }
    for (int64_t i = 0; i < rows * c; ++i) {
      const int ch = static_cast<int>(i % c);
      const float y = BnNormalize(xf[i], mean[ch], variance[ch], gf[ch], bf[ch], epsilon);
      ASSERT_NEAR(y, want.y[i], 1e-5 * (1 + std::fabs(want.y[i]))) << i;
    }

    // The backward pass: one reduction of dy and dy * xhat, then dx.
    const ref::BatchNormGrads grads = ref::BatchNormBackward(x, rows, c, dy, gamma, epsilon);
    const BnInputs back{xf.data(), dyf.data(), mean.data(), variance.data(), epsilon};
    const std::vector<BnSums> g = BnReduce(kBnSumGradients, back, rows, c, max_y);
    std::vector<float> dbeta(c), dgamma(c);
    for (int ch = 0; ch < c; ++ch) {
      dbeta[ch] = static_cast<float>(g[ch].first);
      dgamma[ch] = static_cast<float>(g[ch].second);
      EXPECT_NEAR(dbeta[ch], grads.dbeta[ch], 1e-6 * (1 + std::fabs(grads.dbeta[ch]))) << ch;
      // xhat from the float statistics errs by ~1e-7 per term.
      EXPECT_NEAR(dgamma[ch], grads.dgamma[ch],
                  1e-6 * (1 + std::fabs(grads.dgamma[ch])) + 2e-7 * rows)
          << ch;
    }
    for (int64_t i = 0; i < rows * c; ++i) {
      const int ch = static_cast<int>(i % c);
      const float dx = BnInputGradient(xf[i], dyf[i], mean[ch], variance[ch], gf[ch], dgamma[ch],
                                       dbeta[ch], static_cast<float>(rows), epsilon);
      ASSERT_NEAR(dx, grads.dx[i], 1e-5 * (1 + std::fabs(grads.dx[i]))) << i;
    }
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
    SoftmaxRow(lf.data(), labels.data(), nullptr, m, 0.5f, 0.0f, i, g.data(), row_loss.data(),
               row_correct.data());
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
  // Smoothed targets and row weights.
  const std::vector<float> w = {0.5f, 2.0f, 0.0f, 1.0f, 3.0f, 0.25f};
  for (int64_t i = 0; i < n; ++i) {
    SoftmaxRow(lf.data(), labels.data(), w.data(), m, 0.5f, 0.1f, i, g.data(), row_loss.data(),
               row_correct.data());
  }
  want = ref::SoftmaxCrossEntropy(std::vector<double>(lf.begin(), lf.end()), n, m, labels, 0.5,
                                  0.1f, std::vector<double>(w.begin(), w.end()));
  ASSERT_TRUE(want.ok());
  loss = 0;
  for (int i = 0; i < n; ++i) loss += row_loss[i];
  EXPECT_NEAR(loss, want->loss_sum, 1e-5);
  for (int i = 0; i < n * m; ++i) EXPECT_NEAR(g[i], want->dlogits[i], 1e-7) << i;
}

// A label outside [0, m) (the CUDA kernel cannot refuse it without waiting
// for the device): that row's loss is NaN and nothing outside the row is
// read (the logits are exactly n x m, so AddressSanitizer sees a read past
// the last row's); the other rows are as before.
TEST(CudaKernelMathTest, ASoftmaxRowWithABadLabelIsNaNAndReadsOnlyItsRow) {
  const int n = 2, m = 3;
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 1.0f, 0.0f, -0.5f};
  for (int32_t bad : {m, -1, 1000000}) {
    SCOPED_TRACE(bad);
    const std::vector<int32_t> labels = {2, bad};
    std::vector<float> g(n * m);
    std::vector<double> row_loss(n);
    std::vector<int> row_correct(n, 7);
    for (int64_t i = 0; i < n; ++i) {
      SoftmaxRow(logits.data(), labels.data(), nullptr, m, 1.0f, 0.0f, i, g.data(), row_loss.data(),
                 row_correct.data());
    }
    EXPECT_TRUE(std::isfinite(row_loss[0]));
    EXPECT_EQ(row_correct[0], 1);
    EXPECT_TRUE(std::isnan(row_loss[1]));
    EXPECT_EQ(row_correct[1], 0);
    double sum = 0;
    for (int j = 0; j < m; ++j) sum += g[m + j];
    EXPECT_NEAR(sum, 1.0, 1e-6) << "the probabilities, no target taken off";
  }
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

// Every thread of the lookup's grid and every column of the gradient's, on
// the host: rows by id, NaN for ids that name none, repeats summed in order.
TEST(CudaKernelMathTest, EmbeddingLookupAndGradientByElementAndColumn) {
  const int64_t rows = 4, d = 3;
  std::vector<float> table(rows * d);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f;
  const std::vector<float> ids = {2, 0, 2, 3, 4, -1, 1.5f};
  for (int64_t e = 0; e < static_cast<int64_t>(ids.size()) * d; ++e) {
    const float got = math::EmbeddingLookupElement(ids.data(), table.data(), rows, d, e);
    const int64_t i = e / d, k = e % d;
    if (i >= 4) {
      EXPECT_TRUE(std::isnan(got)) << "id " << ids[i];
    } else {
      EXPECT_EQ(got, table[static_cast<int64_t>(ids[i]) * d + k]) << e;
    }
  }
  std::vector<float> dy(ids.size() * d);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 1.0f + static_cast<float>(i);
  std::vector<float> dtable(rows * d, 0.0f);
  for (int64_t k = 0; k < d; ++k) {
    math::EmbeddingGradientColumn(ids.data(), dy.data(), static_cast<int64_t>(ids.size()), rows, d,
                                  k, dtable.data());
  }
  for (int64_t k = 0; k < d; ++k) {
    EXPECT_EQ(dtable[2 * d + k], dy[0 * d + k] + dy[2 * d + k]);
    EXPECT_EQ(dtable[0 * d + k], dy[1 * d + k]);
    EXPECT_EQ(dtable[3 * d + k], dy[3 * d + k]);
    EXPECT_EQ(dtable[1 * d + k], 0.0f) << "1.5 names no row";
  }
}

}  // namespace
}  // namespace cuda
}  // namespace compute
}  // namespace psc
