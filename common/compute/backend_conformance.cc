#include "common/compute/backend_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/compute/batch_norm_ops.h"
#include "common/compute/conv_ops.h"
#include "common/compute/dense_ops.h"
#include "common/compute/elementwise_ops.h"
#include "common/compute/kernel_registry.h"
#include "common/compute/loss_ops.h"
#include "common/compute/pooling_ops.h"
#include "common/compute/reference/reference_ops.h"
#include "common/ops/op_def.h"

// Asserts that `rexpr` (an absl::StatusOr<T>) is OK and moves its value into
// `lhs` (a declaration or an lvalue).
#define CONFORMANCE_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  CONFORMANCE_ASSERT_OK_AND_ASSIGN_IMPL_(            \
      PSC_STATUS_MACROS_CONCAT_(conformance_statusor_, __LINE__), lhs, rexpr)
#define CONFORMANCE_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                           \
  ASSERT_TRUE(statusor.ok()) << statusor.status();                   \
  lhs = std::move(statusor).value()

namespace psc {
namespace compute {

void PrintTo(const BackendFactory& factory, std::ostream* os) { *os << factory.name; }

std::string BackendFactoryName(const ::testing::TestParamInfo<BackendFactory>& info) {
  return info.param.name;
}

void BackendConformanceTest::SetUp() {
  const BackendFactory& factory = GetParam();
  ASSERT_TRUE(factory.make) << factory.name << ": no make function";
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = factory.make();
  if (!backend.ok() && backend.status().code() == absl::StatusCode::kUnavailable &&
      !factory.must_support_all) {
    GTEST_SKIP() << factory.name << ": " << backend.status();
  }
  ASSERT_TRUE(backend.ok()) << factory.name << ": " << backend.status();
  ASSERT_NE(*backend, nullptr);
  backend_ = std::move(*backend);
}

namespace {

std::string SpecText(const OpSpec& spec) {
  return absl::StrCat(spec.op, " input ", ShapeText(spec.input), " kernel ",
                      ShapeText(spec.kernel));
}

}  // namespace

bool BackendConformanceTest::Supported(const OpSpec& spec) {
  if (backend_->Supports(spec)) {
    ++cases_run_;
    return true;
  }
  if (GetParam().must_support_all) {
    ADD_FAILURE() << backend_->name() << " does not support " << SpecText(spec);
  } else {
    std::cout << "[ UNSUPPORTED ] " << SpecText(spec) << std::endl;
    skipped_.push_back(SpecText(spec));
  }
  return false;
}

void BackendConformanceTest::SkipIfNothingRan() {
  if (cases_run_ == 0 && !skipped_.empty()) {
    GTEST_SKIP() << backend_->name() << " supports none of: " << absl::StrJoin(skipped_, "; ");
  }
}

namespace {

namespace ref = ::psc::compute::reference;
using Host = std::vector<double>;   // float-valued doubles, what the reference takes
using Floats = std::vector<float>;  // what a backend returns

// ---- Shapes ----

// OpSpec convention used here: `input` is the forward op's input activation
// (x for convolution, pooling and dense ops, forward or backward; y for
// ReluBackward; the logits for SoftmaxCrossEntropy), `kernel` the op's kernel.
// The reference's description of a window.
ref::Window2D RefWindow(const Window& w) {
  return {static_cast<int>(w.height),     static_cast<int>(w.width),
          static_cast<int>(w.stride_h),   static_cast<int>(w.stride_w),
          w.padding == Padding::kSame,    static_cast<int>(w.dilation_h),
          static_cast<int>(w.dilation_w), static_cast<int>(w.groups)};
}

struct ConvCase {
  int n, h, w, c, k;
  Window win = kConv3x3Same;
  bool bias = true;
  Shape x() const { return {n, h, w, c}; }
  Shape y() const { return win.Output(x(), k); }
  Shape kernel() const { return win.Kernel(c, k); }
  int64_t taps() const { return win.height * win.width; }
  // Input and output channels per group.
  int64_t cg() const { return c / win.groups; }
  int64_t kg() const { return k / win.groups; }
  int64_t xsize() const { return int64_t{n} * h * w * c; }
  int64_t ysize() const { return ShapeSize(y()); }
  int64_t ksize() const { return taps() * cg() * k; }
  // The positions one kernel element meets: n * OH * OW.
  int64_t positions() const { return ysize() / k; }
  ref::Window2D rw() const { return RefWindow(win); }
  OpSpec Spec(const char* op) const { return {op, x(), kernel(), win}; }
  std::string Text() const {
    return absl::StrCat("conv x ", ShapeText(x()), " -> ", k, " ", win.Text(),
                        bias ? "" : " no bias");
  }
};

struct PoolCase {
  int n, h, w, c;
  Window win = kPool2x2;
  Shape x() const { return {n, h, w, c}; }
  Shape y() const { return win.Output(x(), c); }
  int64_t xsize() const { return int64_t{n} * h * w * c; }
  int64_t ysize() const { return ShapeSize(y()); }
  ref::Window2D rw() const { return RefWindow(win); }
  OpSpec Spec(const char* op) const { return {op, x(), {}, win}; }
  std::string Text() const { return absl::StrCat("pool x ", ShapeText(x()), " ", win.Text()); }
};

// x is [n, K] if flat, else [n, h, w, c] with K = h*w*c.
struct DenseCase {
  int n, h, w, c, m;
  bool flat;
  int k() const { return h * w * c; }
  Shape x() const { return flat ? Shape{n, k()} : Shape{n, h, w, c}; }
  Shape y() const { return {n, m}; }
  Shape kernel() const { return {k(), m}; }
  int64_t xsize() const { return int64_t{n} * k(); }
  int64_t ysize() const { return int64_t{n} * m; }
  OpSpec Spec(const char* op) const { return {op, x(), kernel()}; }
  std::string Text() const { return absl::StrCat("dense x ", ShapeText(x()), " -> ", m); }
};

// seed_cnn at batch 4: conv(relu) x2, pool, conv x2, pool, conv x2, pool
// (7 -> 3), dense 1152 -> 128 (relu), dense 128 -> 10, softmax-xent.
constexpr ConvCase kSeedConvs[] = {{4, 28, 28, 1, 32},  {4, 28, 28, 32, 32}, {4, 14, 14, 32, 64},
                                   {4, 14, 14, 64, 64}, {4, 7, 7, 64, 128},  {4, 7, 7, 128, 128}};
constexpr PoolCase kSeedPools[] = {{4, 28, 28, 32}, {4, 14, 14, 64}, {4, 7, 7, 128}};
constexpr DenseCase kSeedDense1 = {4, 3, 3, 128, 128, /*flat=*/false};
constexpr DenseCase kSeedDense2 = {4, 1, 1, 128, 10, /*flat=*/true};
constexpr int kSeedBatch = 4;
constexpr int kSeedClasses = 10;

// An integer in [lo, hi] from one raw draw.
int Draw(std::mt19937* rng, int lo, int hi) {
  return lo + static_cast<int>((*rng)() % static_cast<uint32_t>(hi - lo + 1));
}

constexpr Padding kSame = Padding::kSame, kValid = Padding::kValid;

// ---- Host <-> backend ----

absl::StatusOr<std::unique_ptr<DeviceTensor>> Upload(ComputeBackend* be, const Shape& shape,
                                                     const Host& values) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t, be->Allocate(shape));
  const Floats f(values.begin(), values.end());
  PSC_RETURN_IF_ERROR(be->CopyFromHost(f, t.get()));
  return t;
}

// An output tensor filled with NaN, so that an op that leaves elements
// unwritten or adds into its output fails the comparison.
absl::StatusOr<std::unique_ptr<DeviceTensor>> Output(ComputeBackend* be, const Shape& shape) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t, be->Allocate(shape));
  const Floats nan(ShapeSize(shape), std::numeric_limits<float>::quiet_NaN());
  PSC_RETURN_IF_ERROR(be->CopyFromHost(nan, t.get()));
  return t;
}

absl::StatusOr<Floats> Download(ComputeBackend* be, const DeviceTensor& t) {
  Floats f(t.size());
  PSC_RETURN_IF_ERROR(be->CopyToHost(t, absl::MakeSpan(f)));
  return f;
}

Host ToHost(const Floats& f) { return Host(f.begin(), f.end()); }

// A host tensor of any dtype on the backend, and back.
template <typename T>
absl::StatusOr<std::unique_ptr<DeviceTensor>> UploadAs(ComputeBackend* be,
                                                       const ops::HostTensor& h) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> t, be->Allocate(h.shape, h.dtype));
  const std::vector<T> v(h.values.begin(), h.values.end());
  PSC_RETURN_IF_ERROR(be->CopyFromHost(absl::MakeConstSpan(v), t.get()));
  return t;
}
absl::StatusOr<std::unique_ptr<DeviceTensor>> UploadTensor(ComputeBackend* be,
                                                           const ops::HostTensor& h) {
  switch (h.dtype) {
    case DType::kFloat32:
      return UploadAs<float>(be, h);
    case DType::kInt32:
      return UploadAs<int32_t>(be, h);
    case DType::kInt64:
      return UploadAs<int64_t>(be, h);
    case DType::kFloat64:
      return UploadAs<double>(be, h);
    case DType::kBFloat16:
    case DType::kFloat16:
      return UploadAs<float>(be, h);  // rounded going in
  }
  return absl::InternalError("no such dtype");
}
// An output of `dtype`, filled with what no kernel writes (NaN, or -777 for
// integers), so that one that leaves elements unwritten fails.
absl::StatusOr<std::unique_ptr<DeviceTensor>> OutputOf(ComputeBackend* be, const Shape& shape,
                                                       DType dtype) {
  const bool integer = dtype == DType::kInt32 || dtype == DType::kInt64;
  ops::HostTensor fill{
      shape,
      std::vector<double>(ShapeSize(shape),
                          integer ? -777.0 : std::numeric_limits<double>::quiet_NaN()),
      dtype};
  return UploadTensor(be, fill);
}
template <typename T>
absl::StatusOr<std::vector<double>> DownloadAs(ComputeBackend* be, const DeviceTensor& t) {
  std::vector<T> v(t.size());
  PSC_RETURN_IF_ERROR(be->CopyToHost(t, absl::MakeSpan(v)));
  return std::vector<double>(v.begin(), v.end());
}
absl::StatusOr<std::vector<double>> DownloadTensor(ComputeBackend* be, const DeviceTensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return DownloadAs<float>(be, t);
    case DType::kInt32:
      return DownloadAs<int32_t>(be, t);
    case DType::kInt64:
      return DownloadAs<int64_t>(be, t);
    case DType::kFloat64:
      return DownloadAs<double>(be, t);
    case DType::kBFloat16:
    case DType::kFloat16:
      return DownloadAs<float>(be, t);
  }
  return absl::InternalError("no such dtype");
}

// ---- Running one op: upload, run into NaN-filled outputs, download ----

struct FloatGrads {
  Floats dw;
  Floats db;
};

struct SoftmaxOut {
  Floats dlogits;
  double loss_sum = 0;
  int64_t correct = 0;
};

// Without a bias (cc.bias false) the op gets none and `b` is ignored.
absl::StatusOr<Floats> RunConv2D(ComputeBackend* be, const ConvCase& cc, const Host& x,
                                 const Host& w, const Host& b, bool relu) {
  PSC_ASSIGN_OR_RETURN(auto tx, Upload(be, cc.x(), x));
  PSC_ASSIGN_OR_RETURN(auto tw, Upload(be, cc.kernel(), w));
  PSC_ASSIGN_OR_RETURN(auto tb, Upload(be, {cc.k}, b));
  PSC_ASSIGN_OR_RETURN(auto ty, Output(be, cc.y()));
  PSC_RETURN_IF_ERROR(
      conv::Conv2D(be, *tx, *tw, cc.bias ? tb.get() : nullptr, cc.win, relu, ty.get()));
  return Download(be, *ty);
}

absl::StatusOr<Floats> RunConv2DBackwardData(ComputeBackend* be, const ConvCase& cc, const Host& dy,
                                             const Host& w) {
  PSC_ASSIGN_OR_RETURN(auto tdy, Upload(be, cc.y(), dy));
  PSC_ASSIGN_OR_RETURN(auto tw, Upload(be, cc.kernel(), w));
  PSC_ASSIGN_OR_RETURN(auto tdx, Output(be, cc.x()));
  PSC_RETURN_IF_ERROR(conv::Conv2DBackwardData(be, *tdy, *tw, cc.win, tdx.get()));
  return Download(be, *tdx);
}

// Without a bias, g.db is empty.
absl::StatusOr<FloatGrads> RunConv2DBackwardWeights(ComputeBackend* be, const ConvCase& cc,
                                                    const Host& x, const Host& dy) {
  PSC_ASSIGN_OR_RETURN(auto tx, Upload(be, cc.x(), x));
  PSC_ASSIGN_OR_RETURN(auto tdy, Upload(be, cc.y(), dy));
  PSC_ASSIGN_OR_RETURN(auto tdw, Output(be, cc.kernel()));
  PSC_ASSIGN_OR_RETURN(auto tdb, Output(be, {cc.k}));
  PSC_RETURN_IF_ERROR(
      conv::Conv2DBackwardWeights(be, *tx, *tdy, cc.win, tdw.get(), cc.bias ? tdb.get() : nullptr));
  FloatGrads g;
  PSC_ASSIGN_OR_RETURN(g.dw, Download(be, *tdw));
  if (cc.bias) {
    PSC_ASSIGN_OR_RETURN(g.db, Download(be, *tdb));
  }
  return g;
}

absl::StatusOr<Floats> RunReluBackward(ComputeBackend* be, const Shape& shape, const Host& y,
                                       const Host& dy) {
  PSC_ASSIGN_OR_RETURN(auto ty, Upload(be, shape, y));
  PSC_ASSIGN_OR_RETURN(auto tdy, Upload(be, shape, dy));
  PSC_ASSIGN_OR_RETURN(auto tdx, Output(be, shape));
  PSC_RETURN_IF_ERROR(elementwise::ReluBackward(be, *ty, *tdy, tdx.get()));
  return Download(be, *tdx);
}

// An empty `b`: no bias.
absl::StatusOr<Floats> RunDense(ComputeBackend* be, const DenseCase& dc, const Host& x,
                                const Host& w, const Host& b, bool relu) {
  PSC_ASSIGN_OR_RETURN(auto tx, Upload(be, dc.x(), x));
  PSC_ASSIGN_OR_RETURN(auto tw, Upload(be, dc.kernel(), w));
  PSC_ASSIGN_OR_RETURN(auto tb, Upload(be, {dc.m}, b.empty() ? Host(dc.m, 0.0) : b));
  PSC_ASSIGN_OR_RETURN(auto ty, Output(be, dc.y()));
  PSC_RETURN_IF_ERROR(dense::Dense(be, *tx, *tw, b.empty() ? nullptr : tb.get(), relu, ty.get()));
  return Download(be, *ty);
}

absl::StatusOr<Floats> RunDenseBackwardData(ComputeBackend* be, const DenseCase& dc, const Host& dy,
                                            const Host& w) {
  PSC_ASSIGN_OR_RETURN(auto tdy, Upload(be, dc.y(), dy));
  PSC_ASSIGN_OR_RETURN(auto tw, Upload(be, dc.kernel(), w));
  PSC_ASSIGN_OR_RETURN(auto tdx, Output(be, dc.x()));
  PSC_RETURN_IF_ERROR(dense::DenseBackwardData(be, *tdy, *tw, tdx.get()));
  return Download(be, *tdx);
}

// Without `bias`, g.db is empty.
absl::StatusOr<FloatGrads> RunDenseBackwardWeights(ComputeBackend* be, const DenseCase& dc,
                                                   const Host& x, const Host& dy,
                                                   bool bias = true) {
  PSC_ASSIGN_OR_RETURN(auto tx, Upload(be, dc.x(), x));
  PSC_ASSIGN_OR_RETURN(auto tdy, Upload(be, dc.y(), dy));
  PSC_ASSIGN_OR_RETURN(auto tdw, Output(be, dc.kernel()));
  PSC_ASSIGN_OR_RETURN(auto tdb, Output(be, {dc.m}));
  PSC_RETURN_IF_ERROR(
      dense::DenseBackwardWeights(be, *tx, *tdy, tdw.get(), bias ? tdb.get() : nullptr));
  FloatGrads g;
  PSC_ASSIGN_OR_RETURN(g.dw, Download(be, *tdw));
  if (bias) {
    PSC_ASSIGN_OR_RETURN(g.db, Download(be, *tdb));
  }
  return g;
}

// The loss through its typed call (loss_ops.h), as the executor runs it:
// labels and weights uploaded, the totals read back.
absl::StatusOr<SoftmaxOut> RunSoftmaxCrossEntropy(ComputeBackend* be, int n, int m,
                                                  const Host& logits,
                                                  const std::vector<int32_t>& labels,
                                                  float grad_scale, float label_smoothing = 0,
                                                  const std::vector<float>& weights = {}) {
  PSC_ASSIGN_OR_RETURN(auto tl, Upload(be, {n, m}, logits));
  PSC_ASSIGN_OR_RETURN(auto ty, be->Allocate({static_cast<int64_t>(labels.size())}, DType::kInt32));
  PSC_RETURN_IF_ERROR(be->CopyFromHost(absl::MakeConstSpan(labels), ty.get()));
  std::unique_ptr<DeviceTensor> tw;
  if (!weights.empty()) {
    PSC_ASSIGN_OR_RETURN(tw, be->Allocate({static_cast<int64_t>(weights.size())}));
    PSC_RETURN_IF_ERROR(be->CopyFromHost(absl::MakeConstSpan(weights), tw.get()));
  }
  PSC_ASSIGN_OR_RETURN(auto td, Output(be, {n, m}));
  PSC_ASSIGN_OR_RETURN(auto loss, be->Allocate({1}, DType::kFloat64));
  PSC_ASSIGN_OR_RETURN(auto correct, be->Allocate({1}, DType::kInt64));
  PSC_RETURN_IF_ERROR(loss::SoftmaxCrossEntropy(be, *tl, *ty, tw.get(), grad_scale, label_smoothing,
                                                td.get(), loss.get(), correct.get()));
  SoftmaxOut out;
  PSC_RETURN_IF_ERROR(be->CopyToHost(*loss, absl::MakeSpan(&out.loss_sum, size_t{1})));
  PSC_RETURN_IF_ERROR(be->CopyToHost(*correct, absl::MakeSpan(&out.correct, size_t{1})));
  PSC_ASSIGN_OR_RETURN(out.dlogits, Download(be, *td));
  return out;
}

// ---- Comparisons ----

constexpr double kRtol = 1e-4;
constexpr double kAtolPerSqrtTerm = 1e-5;
constexpr double kFdEps = 1e-3;  // central-difference step on the double reference

::testing::AssertionResult CloseWithin(const Floats& got, const Host& want, double atol,
                                       double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  }
  int64_t bad = 0;
  double worst = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::abs(want[i]))) {
      if (++bad <= 5) absl::StrAppend(&first, " [", i, "] got ", got[i], " want ", want[i], ";");
      worst = std::isnan(err) ? err : std::max(worst, err);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " differ (atol " << atol << ", rtol " << rtol
         << ", worst error " << worst << "):" << first;
}

// For outputs that each sum `terms` products of values in [-1, 1]; see the
// header for the bound.
::testing::AssertionResult Close(const Floats& got, const Host& want, int64_t terms) {
  return CloseWithin(got, want, kAtolPerSqrtTerm * std::sqrt(std::max<double>(terms, 1)), kRtol);
}

// Half the spacing of `dtype`'s values near 1 (its significand's bits p:
// 2^-p): bfloat16 2^-8, float16 2^-11, float32 2^-24. A kernel that computes
// in float32 and rounds its output to `dtype` errs by float32's tolerance
// plus this, relative.
double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
    default:
      return std::ldexp(1.0, -24);
  }
}

::testing::AssertionResult Exact(const Floats& got, const Host& want) {
  return CloseWithin(got, want, 0, 0);
}

::testing::AssertionResult BitIdentical(const Floats& a, const Floats& b) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) {
    return ::testing::AssertionSuccess();
  }
  int64_t differ = a.size() == b.size() ? 0 : -1;
  for (size_t i = 0; differ >= 0 && i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) ++differ;
  }
  return ::testing::AssertionFailure() << differ << " of " << a.size() << " values differ";
}

Host Random(std::mt19937* rng, int64_t count, double lo = -1, double hi = 1) {
  return ref::RandomUniform(rng, count, lo, hi);
}

std::vector<int32_t> RandomLabels(std::mt19937* rng, int n, int m) {
  std::vector<int32_t> labels(n);
  for (int32_t& l : labels) l = Draw(rng, 0, m - 1);
  return labels;
}

// Zeroes r where the pre-activation is within 0.01 of the ReLU's kink, so a
// central-difference step (kFdEps moves a pre-activation by at most kFdEps
// when weights are in [-1, 1]) never crosses it where it counts.
void MaskNearKink(const Host& pre, Host* r) {
  for (size_t i = 0; i < r->size(); ++i) {
    if (std::abs(pre[i]) < 0.01) (*r)[i] = 0;
  }
}

// ---- Per-op checks against the reference ----

// loss_sum (a sum over n*m terms), the correct count and the gradient
// against the reference.
void ExpectSoftmaxMatches(const SoftmaxOut& got, const ref::SoftmaxCrossEntropyResult& want, int n,
                          int m) {
  EXPECT_TRUE(std::isfinite(got.loss_sum));
  EXPECT_LE(
      std::abs(got.loss_sum - want.loss_sum),
      kAtolPerSqrtTerm * std::sqrt(static_cast<double>(n) * m) + kRtol * std::abs(want.loss_sum))
      << "loss_sum " << got.loss_sum << " want " << want.loss_sum;
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_TRUE(Close(got.dlogits, want.dlogits, m)) << "dlogits";
}

TEST_P(BackendConformanceTest, SoftmaxCrossEntropyRefusesBadLabelsWeightsAndSmoothing) {
  const int n = 2, m = 3;
  if (!Supported({loss::kSoftmaxCrossEntropy, {n, m}, {}})) return SkipIfNothingRan();
  const Host logits(6, 0.5);
  // The host's check, which the executor makes before any upload.
  for (const std::vector<int32_t>& labels :
       {std::vector<int32_t>{0, 3}, {-1, 0}, {0, 1000000}, {0}, {0, 1, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(labels));
    EXPECT_EQ(loss::CheckLabels(labels, {}, n, m).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(loss::CheckLabels(std::vector<int32_t>{0, 1}, std::vector<float>{1.0f}, n, m).code(),
            absl::StatusCode::kInvalidArgument)
      << "one weight for two labels";
  EXPECT_TRUE(loss::CheckLabels(std::vector<int32_t>{0, 2}, {}, n, m).ok());
  // A kernel refuses labels and weights of another length, and smoothing
  // outside [0, 1]; a label out of range it refuses where it sees the
  // labels on the host, or else gives a NaN loss (loss_ops.h).
  for (const std::vector<int32_t>& labels : {std::vector<int32_t>{0}, {0, 1, 2}}) {
    EXPECT_EQ(RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, labels, 1.0f).status().code(),
              absl::StatusCode::kInvalidArgument)
        << labels.size() << " labels";
  }
  EXPECT_EQ(RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, {0, 1}, 1.0f, 0.0f, {1.0f})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument)
      << "one weight";
  for (float smoothing : {-0.1f, 1.5f, NAN}) {
    EXPECT_EQ(RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, {0, 1}, 1.0f, smoothing)
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << "smoothing " << smoothing;
  }
  const absl::StatusOr<SoftmaxOut> bad =
      RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, {0, 3}, 1.0f);
  if (bad.ok()) {
    EXPECT_TRUE(std::isnan(bad->loss_sum)) << "a label out of range: " << bad->loss_sum;
  } else {
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  }
}

// ---- The seed_cnn shapes ----

// Every backend, whether or not it must support every op of this suite,
// must run the reference model's.
TEST_P(BackendConformanceTest, SupportsEverySeedCnnOp) {
  std::vector<OpSpec> specs;
  for (const ConvCase& cc : kSeedConvs) {
    for (const char* op :
         {conv::kConv2D, conv::kConv2DBackwardData, conv::kConv2DBackwardWeights}) {
      specs.push_back(cc.Spec(op));
    }
    specs.push_back({elementwise::kReluBackward, cc.y(), {}});
  }
  for (const PoolCase& pc : kSeedPools) {
    specs.push_back(pc.Spec(pooling::kMaxPool));
    specs.push_back(pc.Spec(pooling::kMaxPoolBackward));
  }
  for (const DenseCase& dc : {kSeedDense1, kSeedDense2}) {
    for (const char* op :
         {dense::kDense, dense::kDenseBackwardData, dense::kDenseBackwardWeights}) {
      specs.push_back(dc.Spec(op));
    }
    specs.push_back({elementwise::kReluBackward, dc.y(), {}});
  }
  specs.push_back({loss::kSoftmaxCrossEntropy, {kSeedBatch, kSeedClasses}, {}});
  for (const OpSpec& spec : specs) {
    EXPECT_TRUE(backend_->Supports(spec)) << SpecText(spec);
  }
}

TEST_P(BackendConformanceTest, SeedCnnDenseAndLossMatchReference) {
  std::mt19937 rng(15);
  for (const auto& [dc, relu] : {std::pair{kSeedDense1, true}, std::pair{kSeedDense2, false}}) {
    SCOPED_TRACE(absl::StrCat(dc.Text(), " relu ", relu));
    if (!Supported(dc.Spec(dense::kDense)) || !Supported(dc.Spec(dense::kDenseBackwardData)) ||
        !Supported(dc.Spec(dense::kDenseBackwardWeights))) {
      continue;
    }
    const Host x = Random(&rng, dc.xsize()), w = Random(&rng, int64_t{dc.k()} * dc.m),
               b = Random(&rng, dc.m), dy = Random(&rng, dc.ysize());
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats y, RunDense(backend_.get(), dc, x, w, b, relu));
    EXPECT_TRUE(Close(y, ref::Dense(x, dc.n, dc.k(), w, b, dc.m, relu), dc.k() + 1)) << "y";
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats dx, RunDenseBackwardData(backend_.get(), dc, dy, w));
    EXPECT_TRUE(Close(dx, ref::DenseBackwardData(dy, dc.n, dc.m, w, dc.k()), dc.m)) << "dx";
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads g,
                                     RunDenseBackwardWeights(backend_.get(), dc, x, dy));
    const ref::WeightGrads want = ref::DenseBackwardWeights(x, dc.n, dc.k(), dy, dc.m);
    EXPECT_TRUE(Close(g.dw, want.dw, dc.n)) << "dw";
    EXPECT_TRUE(Close(g.db, want.db, dc.n)) << "db";
  }
  if (Supported({loss::kSoftmaxCrossEntropy, {kSeedBatch, kSeedClasses}, {}})) {
    SCOPED_TRACE("softmax-xent");
    const Host logits = Random(&rng, kSeedBatch * kSeedClasses, -5, 5);
    const std::vector<int32_t> labels = RandomLabels(&rng, kSeedBatch, kSeedClasses);
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(
        SoftmaxOut got,
        RunSoftmaxCrossEntropy(backend_.get(), kSeedBatch, kSeedClasses, logits, labels, 0.25f));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(
        ref::SoftmaxCrossEntropyResult want,
        ref::SoftmaxCrossEntropy(logits, kSeedBatch, kSeedClasses, labels, 0.25));
    ExpectSoftmaxMatches(got, want, kSeedBatch, kSeedClasses);
  }
  SkipIfNothingRan();
}

// ---- Backward ops against central differences of the double reference forward ----
//
// L = sum(forward(...) * r) for a fixed random r; the backend's gradient,
// through its backward ops with dy = r, must match dL/d(input) computed by
// central differences (step kFdEps) of the reference forward. This checks the
// backward math against the forward's definition, not against another
// implementation of the same backward.

TEST_P(BackendConformanceTest, Conv2DGradientsMatchFiniteDifferences) {
  std::mt19937 rng(16);
  for (const ConvCase& cc : {ConvCase{2, 5, 4, 3, 4}, ConvCase{2, 6, 5, 2, 3, {3, 3, 2, 2, kSame}},
                             ConvCase{1, 7, 6, 2, 3, {2, 4, 2, 1, kValid}, false},
                             ConvCase{2, 7, 6, 4, 6, {3, 2, 1, 1, kSame, 2, 1, 2}},
                             ConvCase{1, 6, 6, 3, 6, {3, 3, 2, 2, kSame, 1, 1, 3}}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat(cc.Text(), " relu ", relu));
      if (!Supported(cc.Spec(conv::kConv2D)) || !Supported(cc.Spec(conv::kConv2DBackwardData)) ||
          !Supported(cc.Spec(conv::kConv2DBackwardWeights)) ||
          !Supported({elementwise::kReluBackward, cc.y(), {}})) {
        continue;
      }
      const Host x = Random(&rng, cc.xsize()), w = Random(&rng, cc.ksize()),
                 b = cc.bias ? Random(&rng, cc.k, -0.5, 0.5) : Host(cc.k, 0.0);
      const Host rb = cc.bias ? b : Host();  // what the reference gets
      Host r = Random(&rng, cc.ysize());
      if (relu)
        MaskNearKink(ref::Conv2D(x, cc.n, cc.h, cc.w, cc.c, w, rb, cc.k, cc.rw(), false), &r);
      // dy = r through the backend's own forward and ReLU backward.
      Host dy = r;
      if (relu) {
        CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats y, RunConv2D(backend_.get(), cc, x, w, b, true));
        CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats d,
                                         RunReluBackward(backend_.get(), cc.y(), ToHost(y), r));
        dy = ToHost(d);
      }
      const auto loss_x = [&](const Host& v) {
        return ref::Dot(ref::Conv2D(v, cc.n, cc.h, cc.w, cc.c, w, rb, cc.k, cc.rw(), relu), r);
      };
      const auto loss_w = [&](const Host& v) {
        return ref::Dot(ref::Conv2D(x, cc.n, cc.h, cc.w, cc.c, v, rb, cc.k, cc.rw(), relu), r);
      };
      const auto loss_b = [&](const Host& v) {
        return ref::Dot(ref::Conv2D(x, cc.n, cc.h, cc.w, cc.c, w, v, cc.k, cc.rw(), relu), r);
      };
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats dx, RunConv2DBackwardData(backend_.get(), cc, dy, w));
      EXPECT_TRUE(Close(dx, ref::NumericalGradient(loss_x, x, kFdEps), cc.taps() * cc.k)) << "dx";
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads g,
                                       RunConv2DBackwardWeights(backend_.get(), cc, x, dy));
      EXPECT_TRUE(Close(g.dw, ref::NumericalGradient(loss_w, w, kFdEps), cc.positions())) << "dw";
      if (cc.bias) {
        EXPECT_TRUE(Close(g.db, ref::NumericalGradient(loss_b, b, kFdEps), cc.positions())) << "db";
      }
    }
  }
  SkipIfNothingRan();
}

TEST_P(BackendConformanceTest, DenseGradientsMatchFiniteDifferences) {
  std::mt19937 rng(19);
  for (const DenseCase& dc : {DenseCase{3, 1, 1, 7, 5, true}, DenseCase{2, 2, 3, 3, 5, false}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat(dc.Text(), " relu ", relu));
      if (!Supported(dc.Spec(dense::kDense)) || !Supported(dc.Spec(dense::kDenseBackwardData)) ||
          !Supported(dc.Spec(dense::kDenseBackwardWeights)) ||
          !Supported({elementwise::kReluBackward, dc.y(), {}})) {
        continue;
      }
      const Host x = Random(&rng, dc.xsize()), w = Random(&rng, int64_t{dc.k()} * dc.m),
                 b = Random(&rng, dc.m, -0.5, 0.5);
      Host r = Random(&rng, dc.ysize());
      if (relu) MaskNearKink(ref::Dense(x, dc.n, dc.k(), w, b, dc.m, false), &r);
      Host dy = r;
      if (relu) {
        CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats y, RunDense(backend_.get(), dc, x, w, b, true));
        CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats d,
                                         RunReluBackward(backend_.get(), dc.y(), ToHost(y), r));
        dy = ToHost(d);
      }
      const auto loss_x = [&](const Host& v) {
        return ref::Dot(ref::Dense(v, dc.n, dc.k(), w, b, dc.m, relu), r);
      };
      const auto loss_w = [&](const Host& v) {
        return ref::Dot(ref::Dense(x, dc.n, dc.k(), v, b, dc.m, relu), r);
      };
      const auto loss_b = [&](const Host& v) {
        return ref::Dot(ref::Dense(x, dc.n, dc.k(), w, v, dc.m, relu), r);
      };
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats dx, RunDenseBackwardData(backend_.get(), dc, dy, w));
      EXPECT_TRUE(Close(dx, ref::NumericalGradient(loss_x, x, kFdEps), dc.m)) << "dx";
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads g,
                                       RunDenseBackwardWeights(backend_.get(), dc, x, dy));
      EXPECT_TRUE(Close(g.dw, ref::NumericalGradient(loss_w, w, kFdEps), dc.n)) << "dw";
      EXPECT_TRUE(Close(g.db, ref::NumericalGradient(loss_b, b, kFdEps), dc.n)) << "db";
    }
  }
  SkipIfNothingRan();
}

TEST_P(BackendConformanceTest, SoftmaxCrossEntropyGradientMatchesFiniteDifferences) {
  std::mt19937 rng(20);
  const int n = 4, m = 7;
  if (!Supported({loss::kSoftmaxCrossEntropy, {n, m}, {}})) return SkipIfNothingRan();
  const Host logits = Random(&rng, n * m, -4, 4);
  const std::vector<int32_t> labels = RandomLabels(&rng, n, m);
  const float scale = 0.25f;
  // dlogits = grad_scale * d(loss_sum)/d(logits). The loss is smooth but not
  // linear: a step of 1e-4 keeps the central difference's error under 1e-9.
  const auto loss = [&](const Host& v) {
    return ref::SoftmaxCrossEntropy(v, n, m, labels, scale).value().loss_sum * scale;
  };
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(
      SoftmaxOut got, RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, labels, scale));
  EXPECT_TRUE(Close(got.dlogits, ref::NumericalGradient(loss, logits, 1e-4), m));
  // Smoothed and weighted: still scale * d(loss_sum)/d(logits).
  const Host w = {0.5, 2.0, 0.0, 1.25};
  const auto smoothed = [&](const Host& v) {
    return ref::SoftmaxCrossEntropy(v, n, m, labels, scale, 0.2f, w).value().loss_sum * scale;
  };
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(
      SoftmaxOut weighted, RunSoftmaxCrossEntropy(backend_.get(), n, m, logits, labels, scale, 0.2f,
                                                  std::vector<float>(w.begin(), w.end())));
  EXPECT_TRUE(Close(weighted.dlogits, ref::NumericalGradient(smoothed, logits, 1e-4), m));
}

// ---- Batch normalization ----

constexpr float kBnEpsilon = 1e-3f;  // Keras's default

TEST_P(BackendConformanceTest, BatchNormBadShapesAreInvalidArgument) {
  ComputeBackend* be = backend_.get();
  const Shape shape = {2, 3, 4, 5};
  if (!Supported({batch_norm::kBatchNorm, shape, {}}) ||
      !Supported({batch_norm::kBatchNormBackward, shape, {}}) ||
      !Supported({batch_norm::kBatchNormInference, shape, {}})) {
    return SkipIfNothingRan();
  }
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, be->Allocate(shape));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto c5, be->Allocate({5}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto c5b, be->Allocate({5}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto m, be->Allocate({5}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto v, be->Allocate({5}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto c6, be->Allocate({6}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(shape));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y_bad, be->Allocate({2, 3, 4, 6}));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x3, be->Allocate({2, 3, 5}));
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(batch_norm::BatchNorm(be, *x, *c6, *c5, kBnEpsilon, y.get(), m.get(), v.get()).code(),
            invalid)
      << "gamma [6] for 5 channels";
  EXPECT_EQ(
      batch_norm::BatchNorm(be, *x, *c5, *c5b, kBnEpsilon, y_bad.get(), m.get(), v.get()).code(),
      invalid)
      << "y of another shape";
  EXPECT_EQ(batch_norm::BatchNorm(be, *x, *c5, *c5b, kBnEpsilon, y.get(), c6.get(), v.get()).code(),
            invalid)
      << "mean [6]";
  EXPECT_EQ(
      batch_norm::BatchNorm(be, *x3, *c5, *c5b, kBnEpsilon, x3.get(), m.get(), v.get()).code(),
      invalid)
      << "x of rank 3";
  EXPECT_EQ(batch_norm::BatchNormInference(be, *x, *c5, *c5b, *m, *c6, kBnEpsilon, y.get()).code(),
            invalid)
      << "inference variance [6]";
  EXPECT_EQ(batch_norm::BatchNormBackward(be, *x, *y_bad, *c5, *m, *v, kBnEpsilon, y.get(),
                                          c5b.get(), c5.get())
                .code(),
            invalid)
      << "backward dy of another shape";
  EXPECT_EQ(batch_norm::BatchNormBackward(be, *x, *y, *c5, *m, *v, kBnEpsilon, y.get(), c6.get(),
                                          c5b.get())
                .code(),
            invalid)
      << "backward dgamma [6]";
}

// A softmax applied in place to a convolution's output, as a Conv2D with
// activation="softmax" runs: whatever layout the convolution left (the CPU's
// Winograd writes channel-blocked tensors), the softmax is over each
// position's channels.
TEST_P(BackendConformanceTest, SoftmaxOverAConvolutionsChannels) {
  std::mt19937 rng(35);
  const ConvCase cc{2, 6, 6, 8, 16};
  if (!Supported(cc.Spec(conv::kConv2D)) || !Supported({elementwise::kActivate, cc.y(), {}}) ||
      !Supported({elementwise::kActivateBackward, cc.y(), {}})) {
    return SkipIfNothingRan();
  }
  const Host x = Random(&rng, cc.xsize()), w = Random(&rng, cc.ksize()), b = Random(&rng, cc.k);
  const Host dy = Random(&rng, cc.ysize());
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto tx, Upload(backend_.get(), cc.x(), x));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto tw, Upload(backend_.get(), cc.kernel(), w));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto tb, Upload(backend_.get(), {cc.k}, b));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto ty, Output(backend_.get(), cc.y()));
  ASSERT_TRUE(conv::Conv2D(backend_.get(), *tx, *tw, tb.get(), cc.win, false, ty.get()).ok());
  ASSERT_TRUE(elementwise::Activate(backend_.get(), Activation::kSoftmax, 0, *ty, ty.get()).ok());
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats y, Download(backend_.get(), *ty));
  const Host want =
      ref::Softmax(ref::Conv2D(x, cc.n, cc.h, cc.w, cc.c, w, b, cc.k, cc.rw(), false), cc.k);
  EXPECT_TRUE(Close(y, want, cc.k * cc.taps() * cc.c)) << "forward";
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto tdy, Upload(backend_.get(), cc.y(), dy));
  ASSERT_TRUE(
      elementwise::ActivateBackward(backend_.get(), Activation::kSoftmax, 0, *ty, *tdy, tdy.get())
          .ok());
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats dx, Download(backend_.get(), *tdy));
  EXPECT_TRUE(Close(dx, ref::SoftmaxBackward(ToHost(y), dy, cc.k), cc.k)) << "backward";
}

// CopyBlock moves a block of columns between row-major matrices and leaves
// the rest of y as it was, exactly; a block that leaves its matrix is
// INVALID_ARGUMENT.
TEST_P(BackendConformanceTest, CopyBlockMatchesTheHost) {
  std::mt19937 rng(38);
  const Shape xs = {3, 2, 5}, ys = {3, 7};  // x: 3 rows of 10; y: 3 rows of 7
  const Host x = Random(&rng, ShapeSize(xs)), y0 = Random(&rng, ShapeSize(ys));
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto tx, Upload(backend_.get(), xs, x));
  // Columns [6, 10) of x's rows to columns [2, 6) of y's.
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto ty, Upload(backend_.get(), ys, y0));
  ASSERT_TRUE(elementwise::CopyBlock(backend_.get(), *tx, 10, 6, ty.get(), 7, 2, 3, 4).ok());
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats y, Download(backend_.get(), *ty));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 7; ++c) {
      const double want = c >= 2 && c < 6 ? x[r * 10 + 6 + (c - 2)] : y0[r * 7 + c];
      EXPECT_EQ(y[r * 7 + c], static_cast<float>(want)) << r << "," << c;
    }
  }
  EXPECT_EQ(elementwise::CopyBlock(backend_.get(), *tx, 10, 7, ty.get(), 7, 2, 3, 4).code(),
            absl::StatusCode::kInvalidArgument);  // past x's row
  EXPECT_EQ(elementwise::CopyBlock(backend_.get(), *tx, 10, 0, ty.get(), 7, 4, 3, 4).code(),
            absl::StatusCode::kInvalidArgument);  // past y's row
  EXPECT_EQ(elementwise::CopyBlock(backend_.get(), *tx, 10, 0, ty.get(), 7, 0, 2, 4).code(),
            absl::StatusCode::kInvalidArgument);  // x is not 2 x 10
  EXPECT_EQ(elementwise::CopyBlock(backend_.get(), *tx, 10, 0, tx.get(), 10, 0, 3, 4).code(),
            absl::StatusCode::kInvalidArgument);  // y is x
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats unchanged, Download(backend_.get(), *ty));
  EXPECT_TRUE(BitIdentical(unchanged, y));
}

// ---- Contract errors ----

TEST_P(BackendConformanceTest, WrongOutputShapeIsInvalidArgument) {
  ComputeBackend* be = backend_.get();
  const ConvCase cc = {2, 5, 4, 3, 6};
  if (Supported(cc.Spec(conv::kConv2D)) && Supported(cc.Spec(conv::kConv2DBackwardData)) &&
      Supported(cc.Spec(conv::kConv2DBackwardWeights))) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, be->Allocate(cc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w, be->Allocate(cc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b, be->Allocate({cc.k}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dy, be->Allocate(cc.y()));
    // y with K + 1 channels, with H and W swapped (the right size), of rank 3.
    for (const Shape& bad : {Shape{2, 5, 4, 7}, Shape{2, 4, 5, 6}, Shape{2, 5, 24}}) {
      SCOPED_TRACE(absl::StrCat("Conv2D y ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(bad));
      EXPECT_EQ(conv::Conv2D(be, *x, *w, b.get(), cc.win, false, y.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
    // The output a 2x2 "valid" window would give, with the right kernel.
    {
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(cc.y()));
      const Window other{3, 3, 2, 2, kValid};
      EXPECT_EQ(conv::Conv2D(be, *x, *w, b.get(), other, false, y.get()).code(),
                absl::StatusCode::kInvalidArgument)
          << "Conv2D y of a stride-1 window, run with strides 2";
      const Window too_big{5, 5, 1, 1, kValid};  // the kernel is 3x3
      EXPECT_EQ(conv::Conv2D(be, *x, *w, b.get(), too_big, false, y.get()).code(),
                absl::StatusCode::kInvalidArgument)
          << "Conv2D window 5x5 with a 3x3 kernel";
    }
    for (const Shape& bad : {Shape{2, 5, 4, 4}, Shape{2, 4, 5, 3}}) {
      SCOPED_TRACE(absl::StrCat("Conv2DBackwardData dx ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, be->Allocate(bad));
      EXPECT_EQ(conv::Conv2DBackwardData(be, *dy, *w, cc.win, dx.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
    // dw with C and K swapped, dw with K + 1, db with K + 1.
    for (const auto& [dw_shape, db_shape] :
         {std::pair{Shape{3, 3, 6, 3}, Shape{6}}, std::pair{Shape{3, 3, 3, 7}, Shape{6}},
          std::pair{Shape{3, 3, 3, 6}, Shape{7}}}) {
      SCOPED_TRACE(absl::StrCat("Conv2DBackwardWeights dw ", ShapeText(dw_shape), " db ",
                                ShapeText(db_shape)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dw, be->Allocate(dw_shape));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto db, be->Allocate(db_shape));
      EXPECT_EQ(conv::Conv2DBackwardWeights(be, *x, *dy, cc.win, dw.get(), db.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
  const PoolCase pc = {2, 7, 5, 3};
  for (bool max : {true, false}) {
    if (!Supported(pc.Spec(max ? pooling::kMaxPool : pooling::kAvgPool)) ||
        !Supported(pc.Spec(max ? pooling::kMaxPoolBackward : pooling::kAvgPoolBackward))) {
      continue;
    }
    const auto pool = [&](const DeviceTensor& x, const Window& win, DeviceTensor* y) {
      return max ? pooling::MaxPool(be, x, win, y) : pooling::AvgPool(be, x, win, y);
    };
    const auto backward = [&](const DeviceTensor& x, const DeviceTensor& dy, DeviceTensor* dx) {
      return max ? pooling::MaxPoolBackward(be, x, dy, pc.win, dx)
                 : pooling::AvgPoolBackward(be, x, dy, pc.win, dx);
    };
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, be->Allocate(pc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dy, be->Allocate(pc.y()));
    // Ceil instead of floor, x's own shape, channels off by one.
    for (const Shape& bad : {Shape{2, 4, 3, 3}, Shape{2, 7, 5, 3}, Shape{2, 3, 2, 4}}) {
      SCOPED_TRACE(absl::StrCat(max ? "MaxPool" : "AvgPool", " y ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(bad));
      EXPECT_EQ(pool(*x, pc.win, y.get()).code(), absl::StatusCode::kInvalidArgument);
    }
    // A window larger than a "valid" input has no output; strides of 0.
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(pc.y()));
    EXPECT_EQ(pool(*x, Window{8, 2, 2, 2, kValid}, y.get()).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pool(*x, Window{2, 2, 0, 2, kValid}, y.get()).code(),
              absl::StatusCode::kInvalidArgument);
    // The floor-cut shape and the pooled shape: dx must have x's shape.
    for (const Shape& bad : {Shape{2, 6, 4, 3}, Shape{2, 3, 2, 3}}) {
      SCOPED_TRACE(absl::StrCat(max ? "MaxPool" : "AvgPool", "Backward dx ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, be->Allocate(bad));
      EXPECT_EQ(backward(*x, *dy, dx.get()).code(), absl::StatusCode::kInvalidArgument);
    }
  }
  const DenseCase dc = {3, 1, 1, 7, 5, true};
  if (Supported(dc.Spec(dense::kDense)) && Supported(dc.Spec(dense::kDenseBackwardData)) &&
      Supported(dc.Spec(dense::kDenseBackwardWeights))) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, be->Allocate(dc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w, be->Allocate(dc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b, be->Allocate({dc.m}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dy, be->Allocate(dc.y()));
    // M + 1 outputs, N and M swapped (the right size), flat.
    for (const Shape& bad : {Shape{3, 6}, Shape{5, 3}, Shape{15}}) {
      SCOPED_TRACE(absl::StrCat("Dense y ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(bad));
      EXPECT_EQ(dense::Dense(be, *x, *w, b.get(), true, y.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
    for (const Shape& bad : {Shape{3, 8}, Shape{7, 3}}) {
      SCOPED_TRACE(absl::StrCat("DenseBackwardData dx ", ShapeText(bad)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, be->Allocate(bad));
      EXPECT_EQ(dense::DenseBackwardData(be, *dy, *w, dx.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
    for (const auto& [dw_shape, db_shape] :
         {std::pair{Shape{5, 7}, Shape{5}}, std::pair{Shape{7, 5}, Shape{7}}}) {
      SCOPED_TRACE(absl::StrCat("DenseBackwardWeights dw ", ShapeText(dw_shape), " db ",
                                ShapeText(db_shape)));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dw, be->Allocate(dw_shape));
      CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto db, be->Allocate(db_shape));
      EXPECT_EQ(dense::DenseBackwardWeights(be, *x, *dy, dw.get(), db.get()).code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
  const Shape act = {2, 3, 4, 5};
  if (Supported({elementwise::kReluBackward, act, {}})) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, be->Allocate(act));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, be->Allocate({2, 3, 4, 6}));
    EXPECT_EQ(elementwise::ReluBackward(be, *y, *y, dx.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "ReluBackward dx [2,3,4,6]";
  }
  SkipIfNothingRan();
}

TEST_P(BackendConformanceTest, MismatchedInputShapesAreInvalidArgument) {
  ComputeBackend* be = backend_.get();
  const auto alloc = [be](const Shape& s) { return be->Allocate(s); };
  const ConvCase cc = {2, 5, 4, 3, 6};
  if (Supported(cc.Spec(conv::kConv2D)) && Supported(cc.Spec(conv::kConv2DBackwardData)) &&
      Supported(cc.Spec(conv::kConv2DBackwardWeights))) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, alloc(cc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w, alloc(cc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b, alloc({cc.k}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, alloc(cc.y()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w_c4, alloc({3, 3, 4, 6}));  // C mismatch
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w_k7, alloc({3, 3, 3, 7}));  // K mismatch
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b7, alloc({7}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x_h6, alloc({2, 6, 4, 3}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dw, alloc(cc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto db, alloc({cc.k}));
    EXPECT_EQ(conv::Conv2D(be, *x, *w_c4, b.get(), cc.win, false, y.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Conv2D w with C + 1";
    EXPECT_EQ(conv::Conv2D(be, *x, *w, b7.get(), cc.win, false, y.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Conv2D b with K + 1";
    EXPECT_EQ(conv::Conv2DBackwardData(be, *y, *w_k7, cc.win, x.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Conv2DBackwardData w with K + 1";
    EXPECT_EQ(conv::Conv2DBackwardWeights(be, *x_h6, *y, cc.win, dw.get(), db.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Conv2DBackwardWeights x and dy of different H";
  }
  const PoolCase pc = {2, 7, 5, 3};
  if (Supported(pc.Spec(pooling::kMaxPoolBackward))) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, alloc(pc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dy_ceil, alloc({2, 4, 3, 3}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, alloc(pc.x()));
    EXPECT_EQ(pooling::MaxPoolBackward(be, *x, *dy_ceil, pc.win, dx.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "MaxPoolBackward dy of the ceil shape";
  }
  const DenseCase dc = {3, 1, 1, 7, 5, true};
  if (Supported(dc.Spec(dense::kDense)) && Supported(dc.Spec(dense::kDenseBackwardData)) &&
      Supported(dc.Spec(dense::kDenseBackwardWeights))) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, alloc(dc.x()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x4, alloc({3, 2, 2, 2}));  // H*W*C = 8, not 7
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w, alloc(dc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w_k8, alloc({8, 5}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto w_m6, alloc({7, 6}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b, alloc({dc.m}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto b6, alloc({6}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, alloc(dc.y()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x_n4, alloc({4, 7}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dw, alloc(dc.kernel()));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto db, alloc({dc.m}));
    EXPECT_EQ(dense::Dense(be, *x, *w_k8, b.get(), false, y.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Dense w with K + 1";
    EXPECT_EQ(dense::Dense(be, *x4, *w, b.get(), false, y.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Dense x [3,2,2,2] against w [7,5]";
    EXPECT_EQ(dense::Dense(be, *x, *w, b6.get(), false, y.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "Dense b with M + 1";
    EXPECT_EQ(dense::DenseBackwardData(be, *y, *w_m6, x.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "DenseBackwardData w with M + 1";
    EXPECT_EQ(dense::DenseBackwardWeights(be, *x_n4, *y, dw.get(), db.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "DenseBackwardWeights x and dy of different N";
  }
  const Shape act = {2, 3, 4, 5};
  if (Supported({elementwise::kReluBackward, act, {}})) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto y, alloc(act));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dy, alloc({2, 3, 4, 6}));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto dx, alloc(act));
    EXPECT_EQ(elementwise::ReluBackward(be, *y, *dy, dx.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << "ReluBackward y and dy of different shapes";
  }
  SkipIfNothingRan();
}

TEST_P(BackendConformanceTest, CopyWithTheWrongSizeIsInvalidArgument) {
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto t, backend_->Allocate({2, 3}));
  const Floats five(5, 1.0f), seven(7, 1.0f);
  EXPECT_EQ(backend_->CopyFromHost(five, t.get()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->CopyFromHost(seven, t.get()).code(), absl::StatusCode::kInvalidArgument);
  Floats out(7);
  EXPECT_EQ(backend_->CopyToHost(*t, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->CopyToHost(*t, absl::MakeSpan(out).subspan(0, 5)).code(),
            absl::StatusCode::kInvalidArgument);
}

// Several tensors in one transfer: each buffer gets its tensor (an empty
// one included); a count or size mismatch writes nothing.
TEST_P(BackendConformanceTest, CopyManyToHostMatchesCopyToHost) {
  const std::vector<Shape> shapes = {{3, 3, 2, 4}, {4}, {0, 5}, {1, 1, 1, 1}, {17, 10}};
  std::vector<std::unique_ptr<DeviceTensor>> tensors;
  std::vector<Floats> want;
  for (size_t i = 0; i < shapes.size(); ++i) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto t, backend_->Allocate(shapes[i]));
    Floats v(t->size());
    for (size_t j = 0; j < v.size(); ++j) v[j] = 0.5f * static_cast<float>(j) - 7.0f * i;
    ASSERT_TRUE(backend_->CopyFromHost(v, t.get()).ok());
    tensors.push_back(std::move(t));
    want.push_back(v);
  }
  std::vector<const DeviceTensor*> src;
  std::vector<Floats> got(shapes.size());
  std::vector<absl::Span<float>> dst;
  for (size_t i = 0; i < shapes.size(); ++i) {
    src.push_back(tensors[i].get());
    got[i].assign(tensors[i]->size(), -1.0f);
    dst.push_back(absl::MakeSpan(got[i]));
  }
  ASSERT_TRUE(backend_->CopyManyToHost(src, dst).ok());
  EXPECT_EQ(got, want);
  for (size_t i = 0; i < shapes.size(); ++i) {
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats one, Download(backend_.get(), *tensors[i]));
    EXPECT_EQ(one, got[i]) << i;
  }
  // Mismatches: nothing is written, not even the buffers before the bad one.
  for (Floats& g : got) std::fill(g.begin(), g.end(), -1.0f);
  Floats short_last(got.back().size() - 1, -1.0f);
  std::vector<absl::Span<float>> bad = dst;
  bad.back() = absl::MakeSpan(short_last);
  EXPECT_EQ(backend_->CopyManyToHost(src, bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got[0], Floats(got[0].size(), -1.0f));
  EXPECT_EQ(backend_->CopyManyToHost(absl::MakeConstSpan(src).subspan(1), dst).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->CopyManyToHost({}, {}).ok());
}

TEST_P(BackendConformanceTest, AllocateZeroFillsAndCopiesRoundTrip) {
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto t, backend_->Allocate({3, 1, 2, 5}));
  EXPECT_EQ(t->shape(), (Shape{3, 1, 2, 5}));
  EXPECT_EQ(t->size(), 30);
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats zeros, Download(backend_.get(), *t));
  EXPECT_EQ(zeros, Floats(30, 0.0f));
  Floats values(30);
  for (int i = 0; i < 30; ++i) values[i] = 0.25f * i - 3;
  ASSERT_TRUE(backend_->CopyFromHost(values, t.get()).ok());
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(Floats back, Download(backend_.get(), *t));
  EXPECT_EQ(back, values);
}

// ---- The registered ops (kernel_registry.h), each against its OpDef ----

// Runs `c` through the backend's kernel for `def`: inputs uploaded (null
// where the case leaves one out), outputs NaN-filled of the shapes def's
// rule gives (or the case's own), or with `in_place` >= 0 output 0 written
// over that input; returns the outputs (empty where left out).
// Runs `def` on case c into outputs of the reference's dtypes (`want`),
// output 0 written over input `in_place` when >= 0; the outputs' values.
absl::StatusOr<std::vector<std::vector<double>>> RunRegistered(
    ComputeBackend* be, const ops::OpDef& def, const ops::OpCase& c,
    const std::vector<ops::HostTensor>& want, int in_place) {
  std::vector<Shape> in_shapes;
  std::vector<std::unique_ptr<DeviceTensor>> in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    in_shapes.push_back(c.inputs[i].shape);
    if ((c.absent_inputs >> i) & 1) {
      in.push_back(nullptr);
      continue;
    }
    PSC_ASSIGN_OR_RETURN(auto u, UploadTensor(be, c.inputs[i]));
    in.push_back(std::move(u));
  }
  PSC_ASSIGN_OR_RETURN(std::vector<Shape> out_shapes, def.shapes(in_shapes, c.attrs));
  if (!c.output_shapes.empty()) out_shapes = c.output_shapes;
  std::vector<std::unique_ptr<DeviceTensor>> out;
  std::vector<DeviceTensor*> out_ptrs;
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    if ((c.absent_outputs >> i) & 1) {
      out_ptrs.push_back(nullptr);
    } else if (i == 0 && in_place >= 0) {
      out_ptrs.push_back(in[in_place].get());
    } else {
      PSC_ASSIGN_OR_RETURN(auto o, OutputOf(be, out_shapes[i], want[i].dtype));
      out_ptrs.push_back(o.get());
      out.push_back(std::move(o));
    }
  }
  std::vector<const DeviceTensor*> in_ptrs;
  for (const auto& t : in) in_ptrs.push_back(t.get());
  PSC_RETURN_IF_ERROR(be->Run(def.name, in_ptrs, c.attrs, out_ptrs));
  std::vector<std::vector<double>> got;
  for (DeviceTensor* t : out_ptrs) {
    if (t == nullptr) {
      got.emplace_back();
      continue;
    }
    PSC_ASSIGN_OR_RETURN(std::vector<double> v, DownloadTensor(be, *t));
    got.push_back(std::move(v));
  }
  return got;
}

// A float32 output as the case says (exactly, or within its terms'
// tolerance); an integer one exactly; a float64 one (a total) within the
// tolerance of its terms. `extra`: one more rounding to a 16-bit format
// allowed (RegisteredKernel::extra_rounding), its unit roundoff added to
// the relative tolerance and, over the terms, to the absolute one (a
// rounding before a bias is added is relative to the sum without it).
::testing::AssertionResult MatchesReference(const ops::OpCase& c, const std::vector<double>& got,
                                            const ops::HostTensor& want, double extra = 0) {
  const double sqrt_terms = std::sqrt(std::max<double>(c.terms, 1));
  switch (want.dtype) {
    case DType::kFloat32: {
      const Floats f(got.begin(), got.end());
      if (!c.exact) {
        return CloseWithin(f, want.values, (kAtolPerSqrtTerm + extra) * sqrt_terms, kRtol + extra);
      }
      Host rounded(want.values.size());
      for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = static_cast<float>(want.values[i]);
      return Exact(f, rounded);
    }
    case DType::kInt32:
    case DType::kInt64:
      if (got == want.values) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << ::testing::PrintToString(got) << " against "
                                           << ::testing::PrintToString(want.values);
    case DType::kBFloat16:
    case DType::kFloat16: {
      const Floats f(got.begin(), got.end());
      if (!c.exact) {
        // float32's tolerance, one rounding of the output, and one of each
        // product's float32 operand (a variable, which a kernel computing
        // in the format rounds to it, as Keras casts it), over the terms.
        const double u = UnitRoundoff(want.dtype);
        return CloseWithin(f, want.values, (kAtolPerSqrtTerm + u + extra) * sqrt_terms,
                           kRtol + u + extra);
      }
      Host rounded(want.values.size());
      for (size_t i = 0; i < rounded.size(); ++i)
        rounded[i] = ops::RoundTo(want.dtype, want.values[i]);
      return Exact(f, rounded);
    }
    case DType::kFloat64:
      break;
  }
  if (got.size() != want.values.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.values.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.values[i];
    if (!(std::abs(got[i] - w) <=
          kAtolPerSqrtTerm * std::sqrt(static_cast<double>(c.terms)) + kRtol * std::abs(w))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " against " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs `def` on case c (output 0 written over input `in_place` when >= 0)
// and expects each output the case keeps to match the reference `want`
// (MatchesReference's `extra` for the outputs in `extra_outputs`).
void ExpectMatches(ComputeBackend* be, const ops::OpDef& def, const ops::OpCase& c,
                   const std::vector<ops::HostTensor>& want, int in_place, double extra = 0,
                   uint32_t extra_outputs = 0) {
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(const std::vector<std::vector<double>> got,
                                   RunRegistered(be, def, c, want, in_place));
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if ((c.absent_outputs >> o) & 1) continue;
    EXPECT_TRUE(MatchesReference(c, got[o], want[o], ((extra_outputs >> o) & 1) ? extra : 0))
        << "output " << o << (in_place >= 0 ? " written over input " : "")
        << (in_place >= 0 ? std::to_string(in_place) : "");
  }
}

// Every kernel the backend registered has an OpDef, and on every case of it
// (its own, or its forward's for a gradient op) matches the reference: out
// of place, and written over each input the OpDef allows. A backend that
// must support everything (the CPU) registers every OpDef.
TEST_P(BackendConformanceTest, RegisteredKernelsMatchTheirReferences) {
  const std::vector<ops::OpDef> defs = ops::AllOpDefs();
  const std::vector<std::string> names = backend_->kernels().Names();
  EXPECT_FALSE(names.empty()) << backend_->name() << " registered no kernel";
  if (GetParam().must_support_all) {
    for (const ops::OpDef& def : defs) {
      EXPECT_NE(backend_->kernels().Find(def.name), nullptr) << "no kernel for " << def.name;
    }
  }
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const ops::OpDef* def = ops::FindOpDef(defs, name);
    ASSERT_NE(def, nullptr) << "a kernel for " << name << ", which has no OpDef";
    const RegisteredKernel* kernel = backend_->kernels().Find(name);
    EXPECT_EQ(kernel->inputs, def->inputs);
    EXPECT_EQ(kernel->outputs, def->outputs);
    std::mt19937 rng(41);
    const std::vector<ops::OpCase> cases = ops::CasesOf(defs, *def, &rng);
    EXPECT_FALSE(cases.empty());
    for (const ops::OpCase& c : cases) {
      SCOPED_TRACE(c.name);
      const std::vector<ops::HostTensor> want = def->reference(c.inputs, c.attrs);
      for (int in_place : [&] {
             std::vector<int> runs = {-1};
             runs.insert(runs.end(), def->in_place.begin(), def->in_place.end());
             return runs;
           }()) {
        ExpectMatches(backend_.get(), *def, c, want, in_place);
      }
    }
  }
}

// Every registered op on bfloat16 and on float16 tensors: each case's
// float32 inputs rounded to the format and held in it, its float32 outputs
// written in it, against the double reference of the rounded inputs. An op
// whose kernel takes the format (KernelDtypes::kAny) runs on it; the
// others run through Run's float32 copies. Either way the output errs by
// what float32's would (the case's tolerance) plus one rounding to the
// format (UnitRoundoff, relative), and one rounding of each product's
// float32 operand (the variables, which a kernel in the format rounds to
// it) summed over the output's terms (sqrt(terms) x UnitRoundoff): a kernel
// that rounded its accumulation to the format would not meet it. Cast has
// cases of its own (the float32 ones).
TEST_P(BackendConformanceTest, RegisteredKernelsMatchTheirReferencesInLowPrecision) {
  const std::vector<ops::OpDef> defs = ops::AllOpDefs();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    for (const std::string& name : backend_->kernels().Names()) {
      if (name == elementwise::kCast) continue;
      SCOPED_TRACE(name);
      const ops::OpDef* def = ops::FindOpDef(defs, name);
      ASSERT_NE(def, nullptr);
      // The outputs a kernel rounds once more (kernel_registry.h) may err by
      // that rounding; no other output may.
      const uint32_t extra_outputs = backend_->kernels().Find(name)->extra_rounding;
      std::mt19937 rng(41);
      int ran = 0;
      for (ops::OpCase c : ops::CasesOf(defs, *def, &rng, dtype)) {
        SCOPED_TRACE(c.name);
        c.exact = false;   // float32's result rounded again may be one ulp from the reference's
        bool fits = true;  // float16 holds every input and output
        for (const ops::HostTensor& t : c.inputs) {
          for (double v : t.values) fits = fits && std::isfinite(v);
        }
        std::vector<ops::HostTensor> want = def->reference(c.inputs, c.attrs);
        for (size_t o = 0; o < want.size(); ++o) {
          ops::HostTensor& t = want[o];
          if (t.dtype != DType::kFloat32 || ((def->float32_outputs >> o) & 1) != 0) continue;
          t.dtype = dtype;
          for (double v : t.values) fits = fits && std::isfinite(ops::RoundTo(dtype, v));
        }
        if (!fits) continue;
        ++ran;
        // Out of place, and written over each input the OpDef allows that
        // is held in output 0's dtype.
        std::vector<int> runs = {-1};
        for (int i : def->in_place) {
          if (c.inputs[i].dtype == want[0].dtype) runs.push_back(i);
        }
        for (int in_place : runs) {
          ExpectMatches(backend_.get(), *def, c, want, in_place, UnitRoundoff(dtype),
                        extra_outputs);
        }
      }
      EXPECT_GT(ran, 0) << "no case of " << name << " fits " << DTypeName(dtype);
    }
  }
}

// Each registered op refuses, with INVALID_ARGUMENT and nothing else, its
// first case with any one tensor one element longer than its shape; and
// Run refuses an unknown op, wrong counts and null tensors.
TEST_P(BackendConformanceTest, RegisteredKernelsRefuseWrongShapesAndCounts) {
  const std::vector<ops::OpDef> defs = ops::AllOpDefs();
  for (const std::string& name : backend_->kernels().Names()) {
    SCOPED_TRACE(name);
    const ops::OpDef* def = ops::FindOpDef(defs, name);
    ASSERT_NE(def, nullptr);
    std::mt19937 rng(42);
    const std::vector<ops::OpCase> cases = ops::CasesOf(defs, *def, &rng);
    ASSERT_FALSE(cases.empty());
    const ops::OpCase& c = cases.front();
    // Each tensor's shape and dtype (the reference's for the outputs), and
    // whether the case leaves it out (then it is null, and never the wrong
    // one).
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const ops::HostTensor& t : c.inputs) {
      shapes.push_back(t.shape);
      dtypes.push_back(t.dtype);
    }
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(const std::vector<Shape> outs, def->shapes(shapes, c.attrs));
    shapes.insert(shapes.end(), outs.begin(), outs.end());
    for (const ops::HostTensor& t : def->reference(c.inputs, c.attrs)) dtypes.push_back(t.dtype);
    const uint64_t absent =
        c.absent_inputs | (static_cast<uint64_t>(c.absent_outputs) << def->inputs);
    for (size_t wrong = 0; wrong < shapes.size(); ++wrong) {
      if ((absent >> wrong) & 1) continue;
      std::vector<std::unique_ptr<DeviceTensor>> tensors;
      for (size_t i = 0; i < shapes.size(); ++i) {
        if ((absent >> i) & 1) {
          tensors.push_back(nullptr);
          continue;
        }
        const Shape s = i == wrong ? Shape{ShapeSize(shapes[i]) + 1} : shapes[i];
        CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto t, backend_->Allocate(s, dtypes[i]));
        tensors.push_back(std::move(t));
      }
      std::vector<const DeviceTensor*> in;
      std::vector<DeviceTensor*> out;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (i < static_cast<size_t>(def->inputs)) {
          in.push_back(tensors[i].get());
        } else {
          out.push_back(tensors[i].get());
        }
      }
      const absl::Status s = backend_->Run(name, in, c.attrs, out);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "tensor " << wrong << ": " << s;
      if (!in.empty()) {
        EXPECT_EQ(backend_->Run(name, absl::MakeConstSpan(in).subspan(1), c.attrs, out).code(),
                  absl::StatusCode::kInvalidArgument)
            << "an input short";
        std::vector<const DeviceTensor*> with_null = in;
        with_null[0] = nullptr;
        EXPECT_EQ(backend_->Run(name, with_null, c.attrs, out).code(),
                  absl::StatusCode::kInvalidArgument)
            << "a null input";
      }
    }
  }
  CONFORMANCE_ASSERT_OK_AND_ASSIGN(auto x, backend_->Allocate({2, 2}));
  const DeviceTensor* in[] = {x.get()};
  DeviceTensor* out[] = {x.get()};
  const absl::Status unknown = backend_->Run("NoSuchOp", in, OpAttrs(), out);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnimplemented) << unknown;
  EXPECT_NE(unknown.message().find("no kernel for NoSuchOp"), absl::string_view::npos) << unknown;
}

// ---- Determinism ----

TEST_P(BackendConformanceTest, WeightGradientsAreBitReproducible) {
  std::mt19937 rng(21);
  const ConvCase cc = kSeedConvs[1];  // 28x28x32 -> 32: 3136-term reductions
  if (Supported(cc.Spec(conv::kConv2DBackwardWeights))) {
    SCOPED_TRACE(cc.Text());
    const Host x = Random(&rng, cc.xsize()), dy = Random(&rng, cc.ysize());
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads a,
                                     RunConv2DBackwardWeights(backend_.get(), cc, x, dy));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads b,
                                     RunConv2DBackwardWeights(backend_.get(), cc, x, dy));
    EXPECT_TRUE(BitIdentical(a.dw, b.dw)) << "dw";
    EXPECT_TRUE(BitIdentical(a.db, b.db)) << "db";
  }
  const DenseCase dc = kSeedDense1;
  if (Supported(dc.Spec(dense::kDenseBackwardWeights))) {
    SCOPED_TRACE(dc.Text());
    const Host x = Random(&rng, dc.xsize()), dy = Random(&rng, dc.ysize());
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads a,
                                     RunDenseBackwardWeights(backend_.get(), dc, x, dy));
    CONFORMANCE_ASSERT_OK_AND_ASSIGN(FloatGrads b,
                                     RunDenseBackwardWeights(backend_.get(), dc, x, dy));
    EXPECT_TRUE(BitIdentical(a.dw, b.dw)) << "dw";
    EXPECT_TRUE(BitIdentical(a.db, b.db)) << "db";
  }
  SkipIfNothingRan();
}

}  // namespace

// A test binary may compile this file in without instantiating the suite
// (a GPU binary on a machine that builds no GPU backend).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformanceTest);

}  // namespace compute
}  // namespace psc
