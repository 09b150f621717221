// A shard under a --wire_dtype: gradients arrive and variables leave in
// bfloat16 or float16, while the shard keeps and updates float32; another
// dtype (a worker of another job's settings) is refused before anything
// changes.
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::NamedTensor Wire(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<float>& values, proto::DataType dtype) {
  proto::NamedTensor t;
  t.set_name(name);
  EXPECT_TRUE(tensor::SetWireTensor(shape, values, dtype, t.mutable_tensor()).ok());
  return t;
}

class ShardWireDtypeTest : public ::testing::TestWithParam<proto::DataType> {
 protected:
  void SetUp() override {
    proto::ConfigureRequest c;
    c.set_num_shards(1);
    c.set_num_workers(1);
    c.mutable_policy()->set_mode(proto::MODE_ASYNC);
    c.mutable_policy()->set_wire_dtype(GetParam());
    c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    c.mutable_optimizer()->set_learning_rate(1.0);
    ASSERT_TRUE(shard_.Configure(c).ok());
    proto::CreateVariablesRequest create;
    *create.add_variables() = Wire("w", {3}, {1.0f, 2.0f, 3.0f}, proto::DT_FLOAT32);
    proto::CreateVariablesResponse created;
    ASSERT_TRUE(shard_.CreateVariables(create, &created).ok());
  }

  proto::PushRequest PushOf(const std::vector<float>& grad, proto::DataType dtype, int64_t step) {
    proto::PushRequest p;
    p.mutable_id()->set_step(step);
    *p.add_gradients() = Wire("w", {3}, grad, dtype);
    return p;
  }

  absl::StatusOr<proto::PullResponse> PullAs(proto::DataType dtype) {
    proto::PullRequest req;
    req.set_wire_dtype(dtype);
    proto::PullResponse resp;
    absl::Status status = absl::UnknownError("not called");
    shard_.Pull(req, clock_.Now() + absl::Seconds(1), &resp, [&](absl::Status s) { status = s; });
    if (!status.ok()) return status;
    return resp;
  }

  std::vector<float> Exact() {
    auto pulled = PullAs(proto::DT_FLOAT32);
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return tensor::FloatValues(pulled->variables(0).tensor());
  }

  base::RealClock clock_;
  Shard shard_{ShardOptions{&clock_}};
};

TEST_P(ShardWireDtypeTest, GradientsAreDecodedAndTheShardKeepsFloat32) {
  const proto::DataType wire = GetParam();
  // 0.1 is not exact in either 16-bit format: the update uses the decoded
  // value, and the variable stays float32 (1 - 0.1 rounded, not rounded to
  // 16 bits itself).
  const std::vector<float> grad = {0.1f, -0.25f, 1e-3f};
  proto::PushResponse response;
  ASSERT_TRUE(shard_.Push(PushOf(grad, wire, 0), &response).ok());
  EXPECT_EQ(response.outcome(), proto::PushResponse::APPLIED);
  std::vector<float> decoded(3);
  std::string bytes;
  ASSERT_TRUE(tensor::EncodeFloats(grad, wire, &bytes).ok());
  ASSERT_TRUE(tensor::DecodeFloats(bytes, wire, absl::MakeSpan(decoded)).ok());
  const std::vector<float> start = {1.0f, 2.0f, 3.0f};
  const std::vector<float> now = Exact();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(now[i], start[i] - decoded[i]) << i;
  // A pull in the wire dtype carries the rounded values in half the bytes.
  auto pulled = PullAs(wire);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  const proto::Tensor& t = pulled->variables(0).tensor();
  EXPECT_EQ(t.dtype(), wire);
  EXPECT_EQ(t.data().size(), 3 * *tensor::WireElementBytes(wire));
  std::vector<float> sent(3);
  ASSERT_TRUE(tensor::DecodeFloats(t.data(), wire, absl::MakeSpan(sent)).ok());
  for (int i = 0; i < 3; ++i) {
    std::string one;
    ASSERT_TRUE(tensor::EncodeFloats({now[i]}, wire, &one).ok());
    float want;
    ASSERT_TRUE(tensor::DecodeFloats(one, wire, absl::MakeSpan(&want, 1)).ok());
    EXPECT_EQ(sent[i], want) << i;
  }
  EXPECT_EQ(shard_.Stats().bytes_in(), static_cast<int64_t>(bytes.size()));
}

TEST_P(ShardWireDtypeTest, AnotherDtypeIsAFingerprintMismatchAndChangesNothing) {
  const proto::DataType wire = GetParam();
  const proto::DataType other =
      wire == proto::DT_FLOAT32
          ? proto::DT_BFLOAT16
          : (wire == proto::DT_BFLOAT16 ? proto::DT_FLOAT16 : proto::DT_FLOAT32);
  // The other 16-bit dtype, which a pull may not ask for either.
  const proto::DataType other_half =
      wire == proto::DT_BFLOAT16 ? proto::DT_FLOAT16 : proto::DT_BFLOAT16;
  proto::PushResponse response;
  absl::Status s = shard_.Push(PushOf({1, 1, 1}, other, 0), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("arrives as " + tensor::WireDtypeName(other)));
  EXPECT_THAT(s.message(), HasSubstr("--wire_dtype is " + tensor::WireDtypeName(wire)));
  EXPECT_THAT(s.message(), HasSubstr("fingerprint mismatch"));
  // A push whose pull would ask for a third dtype is refused before it is
  // applied: the same id then still applies once.
  proto::PushRequest push = PushOf({1, 1, 1}, wire, 0);
  push.set_pull_after(true);
  if (wire != proto::DT_FLOAT32) {
    push.set_pull_wire_dtype(other_half);
    s = shard_.Push(push, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("pull asks for"));
  }
  EXPECT_EQ(Exact(), std::vector<float>({1.0f, 2.0f, 3.0f}));
  const proto::ShardStats stats = shard_.Stats();
  EXPECT_EQ(stats.version(), 0);
  EXPECT_EQ(stats.pushes_accepted(), 0);
  EXPECT_EQ(stats.requests_rejected(), wire != proto::DT_FLOAT32 ? 2 : 1);
  push.set_pull_wire_dtype(wire);
  ASSERT_TRUE(shard_.Push(push, &response).ok());
  EXPECT_EQ(response.outcome(), proto::PushResponse::APPLIED);
  // A pull may ask for float32 (exact) or the job's dtype, no other.
  if (wire != proto::DT_FLOAT32) {
    auto pulled = PullAs(other_half);
    EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(PullAs(proto::DT_FLOAT32).ok());
  EXPECT_TRUE(PullAs(proto::DT_INVALID).ok());  // unset: float32
}

TEST_P(ShardWireDtypeTest, SizesAreCheckedInTheWireDtype) {
  const proto::DataType wire = GetParam();
  proto::PushRequest push = PushOf({1, 1, 1}, wire, 0);
  push.mutable_gradients(0)->mutable_tensor()->mutable_data()->append("xy");  // one more half
  proto::PushResponse response;
  absl::Status s = shard_.Push(push, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Exact(), std::vector<float>({1.0f, 2.0f, 3.0f}));
}

INSTANTIATE_TEST_SUITE_P(EveryWireDtype, ShardWireDtypeTest,
                         ::testing::Values(proto::DT_FLOAT32, proto::DT_BFLOAT16,
                                           proto::DT_FLOAT16),
                         [](const auto& info) { return tensor::WireDtypeName(info.param); });

// One shard of one async worker under `wire`, with SGD.
proto::ConfigureRequest AsyncConfig(proto::DataType wire) {
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(1);
  c.mutable_policy()->set_mode(proto::MODE_ASYNC);
  c.mutable_policy()->set_wire_dtype(wire);
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  return c;
}

TEST(ShardWireDtypeConfigTest, AnUnknownWireDtypeIsRefused) {
  base::RealClock clock;
  Shard shard(ShardOptions{&clock});
  const proto::ConfigureRequest c = AsyncConfig(static_cast<proto::DataType>(7));
  absl::Status s = shard.Configure(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("wire_dtype"));
}

// A variable declared pull_float32 (a mixed model's float32 layer) comes
// in float32 from a pull in bfloat16, and exactly; the others in bfloat16.
TEST(ShardWireDtypeConfigTest, AFloat32PulledVariableTravelsExactly) {
  base::RealClock clock;
  Shard shard(ShardOptions{&clock});
  proto::ConfigureRequest c = AsyncConfig(proto::DT_BFLOAT16);
  proto::GradientDeclaration* d = c.add_gradients();
  d->set_variable("exact");
  d->set_pull_float32(true);
  ASSERT_TRUE(shard.Configure(c).ok());
  const std::vector<float> values = {1.001f, -2.0003f, 3.1f};
  proto::CreateVariablesRequest create;
  *create.add_variables() = Wire("exact", {3}, values, proto::DT_FLOAT32);
  *create.add_variables() = Wire("rounded", {3}, values, proto::DT_FLOAT32);
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  proto::PullRequest req;
  req.set_wire_dtype(proto::DT_BFLOAT16);
  proto::PullResponse resp;
  absl::Status status = absl::UnknownError("not called");
  shard.Pull(req, clock.Now() + absl::Seconds(1), &resp, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(resp.variables_size(), 2);
  EXPECT_EQ(resp.variables(0).tensor().dtype(), proto::DT_FLOAT32);
  EXPECT_EQ(tensor::FloatValues(resp.variables(0).tensor()), values);
  EXPECT_EQ(resp.variables(1).tensor().dtype(), proto::DT_BFLOAT16);
  EXPECT_NE(resp.variables(1).tensor().data().size(), resp.variables(0).tensor().data().size());
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
