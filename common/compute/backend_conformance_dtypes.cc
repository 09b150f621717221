// The conformance suite's dtype cases (backend_conformance.h): tensors of
// ids (int32, int64) are allocated zero-filled and copied both ways
// unchanged, a copy of the wrong dtype or count is refused with nothing
// written, and every op refuses an id tensor in any of its tensor arguments.
// Compiled into each backend's test binary beside backend_conformance.cc.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/compute/backend_conformance.h"
#include "common/compute/elementwise_ops.h"
#include "common/ops/op_def.h"

namespace psc {
namespace compute {
namespace {

template <typename T>
void ExpectIdsRoundTrip(ComputeBackend* be, DType dtype, const std::vector<T>& values) {
  SCOPED_TRACE(DTypeName(dtype));
  auto t = be->Allocate({static_cast<int64_t>(values.size()) / 2, 2}, dtype);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->dtype(), dtype);
  EXPECT_EQ((*t)->bytes(), values.size() * sizeof(T));
  std::vector<T> got(values.size(), T{7});
  ASSERT_TRUE(be->CopyToHost(**t, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, std::vector<T>(values.size(), T{0})) << "not zero-filled";
  ASSERT_TRUE(be->CopyFromHost(absl::MakeConstSpan(values), t->get()).ok());
  ASSERT_TRUE(be->CopyToHost(**t, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, values);
}

}  // namespace

TEST_P(BackendConformanceTest, IdTensorsAreZeroFilledAndCopyBothWaysUnchanged) {
  ExpectIdsRoundTrip<int32_t>(backend_.get(), DType::kInt32,
                              {0, 1, -1, 7, std::numeric_limits<int32_t>::max(),
                               std::numeric_limits<int32_t>::min(), 123456789, -42});
  ExpectIdsRoundTrip<int64_t>(backend_.get(), DType::kInt64,
                              {0, 1, -1, int64_t{1} << 40, std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min(), 0x0123456789abcdefLL, -42});
  // float64 (a loss's total) the same way, every bit kept.
  ExpectIdsRoundTrip<double>(backend_.get(), DType::kFloat64,
                             {0.0, 1.0 / 3.0, -2.5e-300, 1e300, std::numeric_limits<double>::max(),
                              std::numeric_limits<double>::denorm_min(), -0.0, 123456.789});
  // A rank-4 tensor of ids is plain memory too (no blocked layout).
  auto t = backend_->Allocate({2, 3, 3, 5}, DType::kInt32);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<int32_t> v(90);
  for (int i = 0; i < 90; ++i) v[i] = i * 1000003 - 45;
  ASSERT_TRUE(backend_->CopyFromHost(absl::MakeConstSpan(v), t->get()).ok());
  std::vector<int32_t> back(90);
  ASSERT_TRUE(backend_->CopyToHost(**t, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, v);
}

TEST_P(BackendConformanceTest, CopiesOfTheWrongDtypeAreRefusedWithNothingWritten) {
  auto ids = backend_->Allocate({2, 3}, DType::kInt32);
  auto wide = backend_->Allocate({2, 3}, DType::kInt64);
  auto floats = backend_->Allocate({2, 3});
  ASSERT_TRUE(ids.ok() && wide.ok() && floats.ok());
  const std::vector<float> f(6, 1.5f);
  const std::vector<int32_t> i32(6, 9);
  const std::vector<int64_t> i64(6, 9);
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(backend_->CopyFromHost(absl::MakeConstSpan(f), ids->get()).code(), invalid);
  EXPECT_EQ(backend_->CopyFromHost(absl::MakeConstSpan(i64), ids->get()).code(), invalid);
  EXPECT_EQ(backend_->CopyFromHost(absl::MakeConstSpan(i32), wide->get()).code(), invalid);
  EXPECT_EQ(backend_->CopyFromHost(absl::MakeConstSpan(i32), floats->get()).code(), invalid);
  EXPECT_EQ(backend_->CopyFromHost(absl::MakeConstSpan(i32).subspan(1), ids->get()).code(),
            invalid);
  std::vector<int32_t> zeros(6, -1);
  ASSERT_TRUE(backend_->CopyToHost(**ids, absl::MakeSpan(zeros)).ok());
  EXPECT_EQ(zeros, std::vector<int32_t>(6, 0)) << "a refused copy wrote";

  std::vector<float> fout(6, -1.0f);
  const absl::Status s = backend_->CopyToHost(**ids, absl::MakeSpan(fout));
  EXPECT_EQ(s.code(), invalid);
  EXPECT_NE(s.message().find("float32 values for a int32 tensor"), absl::string_view::npos) << s;
  EXPECT_EQ(fout, std::vector<float>(6, -1.0f));
  std::vector<int64_t> lout(6, -1);
  EXPECT_EQ(backend_->CopyToHost(**ids, absl::MakeSpan(lout)).code(), invalid);
  EXPECT_EQ(lout, std::vector<int64_t>(6, -1));
  std::vector<double> dout(6, -1.0);
  EXPECT_EQ(backend_->CopyToHost(**wide, absl::MakeSpan(dout)).code(), invalid)
      << "float64 values of an int64 tensor (the same size)";
  EXPECT_EQ(dout, std::vector<double>(6, -1.0));

  // Gradients are float32: CopyManyToHost refuses ids before copying any.
  std::vector<float> first(6, -1.0f), second(6, -1.0f);
  const DeviceTensor* src[] = {floats->get(), ids->get()};
  const absl::Span<float> dst[] = {absl::MakeSpan(first), absl::MakeSpan(second)};
  EXPECT_EQ(backend_->CopyManyToHost(src, dst).code(), invalid);
  EXPECT_EQ(first, std::vector<float>(6, -1.0f));

  EXPECT_EQ(backend_->Allocate({-1, 2}, DType::kInt64).status().code(), invalid);
  EXPECT_EQ(
      backend_->Allocate({int64_t{1} << 31, int64_t{1} << 31, 4}, DType::kInt64).status().code(),
      invalid)
      << "2^64 elements";
}

namespace {

// One op called on tensors of the given shapes and dtypes (outputs last),
// null where `absent` has the tensor's bit.
struct OpCall {
  std::string name;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  uint64_t absent = 0;
  std::function<absl::Status(ComputeBackend*, const std::vector<DeviceTensor*>&)> run;
};

// Every registered op (kernel_registry.h), on its first case's shapes.
std::vector<OpCall> EveryOp() {
  std::vector<OpCall> calls;
  const std::vector<ops::OpDef> defs = ops::AllOpDefs();
  for (const ops::OpDef& def : defs) {
    std::mt19937 rng(1);
    const std::vector<ops::OpCase> cases = ops::CasesOf(defs, def, &rng);
    if (cases.empty()) continue;
    const ops::OpCase& c = cases.front();
    OpCall call{def.name};
    for (const ops::HostTensor& t : c.inputs) {
      call.shapes.push_back(t.shape);
      call.dtypes.push_back(t.dtype);
    }
    const absl::StatusOr<std::vector<Shape>> outs = def.shapes(call.shapes, c.attrs);
    if (!outs.ok()) continue;  // ops_test checks every case's shapes
    call.shapes.insert(call.shapes.end(), outs->begin(), outs->end());
    for (const ops::HostTensor& t : def.reference(c.inputs, c.attrs)) {
      call.dtypes.push_back(t.dtype);
    }
    call.absent = c.absent_inputs | (static_cast<uint64_t>(c.absent_outputs) << def.inputs);
    const int inputs = def.inputs;
    call.run = [name = std::string(def.name), attrs = c.attrs, inputs](
                   ComputeBackend* be, const std::vector<DeviceTensor*>& t) {
      const std::vector<const DeviceTensor*> in(t.begin(), t.begin() + inputs);
      return be->Run(name, in, attrs, absl::MakeConstSpan(t).subspan(inputs));
    };
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace

// Each op runs on tensors of these shapes and dtypes (float32 but for a
// loss's labels and totals), and refuses the same call with any one of
// them of another dtype, naming the op and both dtypes.
TEST_P(BackendConformanceTest, EveryOpRefusesTensorsOfAnotherDtype) {
  for (const OpCall& op : EveryOp()) {
    SCOPED_TRACE(op.name);
    std::vector<std::unique_ptr<DeviceTensor>> owned;
    std::vector<DeviceTensor*> args;
    for (size_t i = 0; i < op.shapes.size(); ++i) {
      if ((op.absent >> i) & 1) {
        args.push_back(nullptr);
        continue;
      }
      auto t = backend_->Allocate(op.shapes[i], op.dtypes[i]);
      ASSERT_TRUE(t.ok()) << t.status();
      args.push_back(t->get());
      owned.push_back(std::move(*t));
    }
    const absl::Status ok = op.run(backend_.get(), args);
    if (absl::IsUnimplemented(ok)) continue;  // a backend that lacks the op
    ASSERT_TRUE(ok.ok()) << ok;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == nullptr) continue;
      for (DType dtype : {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kFloat64}) {
        if (dtype == op.dtypes[i]) continue;
        // Cast takes any float on either side, and names them all.
        const bool cast = op.name == elementwise::kCast;
        if (cast && IsActivationFloat(dtype)) continue;
        auto other = backend_->Allocate(op.shapes[i], dtype);
        ASSERT_TRUE(other.ok()) << other.status();
        std::vector<DeviceTensor*> bad = args;
        bad[i] = other->get();
        const absl::Status s = op.run(backend_.get(), bad);
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
            << "argument " << i << " " << DTypeName(dtype) << ": " << s;
        EXPECT_NE(s.message().find(absl::StrCat(DTypeName(dtype), ", want ",
                                                cast ? "float32" : DTypeName(op.dtypes[i]))),
                  absl::string_view::npos)
            << "argument " << i << ": " << s;
      }
    }
  }
}

}  // namespace compute
}  // namespace psc
