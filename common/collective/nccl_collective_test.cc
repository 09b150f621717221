// Labelled `gpu`. Through the GPU plugin (gpu_plugin/gpu_api.h), as the
// worker calls it, so every test skips where the plugin is not built or no
// GPU is usable (the plugin then refuses to load). The argument and
// rendezvous checks come before any CUDA call; the collectives are compared
// with sums computed here on the host. The device-memory all-reduce works on
// tensors of the CUDA compute backend, as mirrored replicas' gradients are.
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/collective/nccl_group.h"
#include "common/compute/cuda/cuda_types.h"
#include "common/gpu_plugin/testing/test_plugin.h"
#include "gtest/gtest.h"

namespace psc {
namespace collective {
namespace {

// A KeyValueStore in a map, recording what was set. Thread-safe.
class MapStore : public KeyValueStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = values_.emplace(key, value);
    if (!inserted && it->second != value) {
      return absl::AlreadyExistsError("key \"" + key + "\" holds another value");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override {
    absl::MutexLock lock(&mu_);
    auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return values_.count(key) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&present), wait)) {
      return absl::DeadlineExceededError("no key \"" + key + "\" in time");
    }
    return values_.at(key);
  }
  std::map<std::string, std::string> values() const {
    absl::MutexLock lock(&mu_);
    return values_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

gpu::GpuApi* Gpu() { return gpu::testing::TestGpu(); }

// nccl_collective.h's and cuda_backend.h's functions, through the plugin.
absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(KeyValueStore* store,
                                                                 const std::string& prefix,
                                                                 int rank, int size, int device,
                                                                 absl::Duration timeout) {
  return Gpu()->CreateNcclCollective(store, prefix, rank, size, device, timeout);
}
absl::StatusOr<std::unique_ptr<LocalNcclGroup>> CreateLocalNcclGroup(
    const std::vector<int>& devices) {
  return Gpu()->CreateLocalNcclGroup(devices);
}

// The code every failing entry point returns (the plugin is CUDA's).
absl::StatusCode Expected(absl::StatusCode with_cuda) { return with_cuda; }

// Random floats and the awkward ones (signed zero, subnormal, huge, infinite).
std::vector<float> TestValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  const float specials[] = {-0.0f, 1e-40f, -3.0e38f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::min()};
  for (size_t i = 0; i < n && i < sizeof(specials) / sizeof(specials[0]); ++i) v[i] = specials[i];
  return v;
}

// The host's reference: element i of the result is the sum over the
// members' element i, in member order (one member: the value itself).
std::vector<float> ReferenceSum(const std::vector<std::vector<float>>& members) {
  std::vector<float> sum = members[0];
  for (size_t m = 1; m < members.size(); ++m) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += members[m][i];
  }
  return sum;
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Skips the calling test unless a GPU is usable.
#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why;                                                             \
    if (gpu::testing::TestGpu(&why) == nullptr) GTEST_SKIP() << why;             \
    if (Gpu()->ListGpus(&why).empty()) GTEST_SKIP() << "no usable GPU: " << why; \
  } while (0)

// Wrong arguments are refused before any CUDA call: INVALID_ARGUMENT.
TEST(NcclCollectiveTest, ArgumentsAreRefusedBeforeAnyCudaCall) {
  SKIP_WITHOUT_GPU();
  MapStore store;
  const absl::Duration t = absl::Seconds(5);
  const absl::StatusCode invalid = Expected(absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", 0, 0, 0, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", 0, -1, 0, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", -1, 2, 0, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", 2, 2, 0, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(nullptr, "g/", 0, 1, 0, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", 0, 1, -1, t).status().code(), invalid);
  EXPECT_EQ(CreateNcclCollective(&store, "g/", 0, 1, 0, absl::ZeroDuration()).status().code(),
            invalid);
  EXPECT_TRUE(store.values().empty()) << "a refused call published an id";

  EXPECT_EQ(CreateLocalNcclGroup({}).status().code(), invalid);
  EXPECT_EQ(CreateLocalNcclGroup({-1}).status().code(), invalid);
  EXPECT_EQ(CreateLocalNcclGroup({0, 0}).status().code(), invalid);
}

// Rank 1 waits for rank 0's id in the store, before any CUDA call, and
// gives up at the timeout.
TEST(NcclCollectiveTest, RankWhosePeerNeverPublishesTheIdTimesOut) {
  SKIP_WITHOUT_GPU();
  MapStore store;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Collective>> c =
      CreateNcclCollective(&store, "gen7/", 1, 2, 0, absl::Milliseconds(200));
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(c.status().code(), Expected(absl::StatusCode::kDeadlineExceeded)) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "gen7/nccl_unique_id")) << c.status();
  EXPECT_LT(took, absl::Seconds(30)) << "the wait is bounded by the timeout";
  EXPECT_TRUE(store.values().empty());
}

TEST(NcclCollectiveTest, SingleRankAllReduceLeavesTheValuesBitForBit) {
  SKIP_WITHOUT_GPU();
  MapStore store;
  absl::StatusOr<std::unique_ptr<Collective>> c =
      CreateNcclCollective(&store, "gen1/", 0, 1, 0, absl::Seconds(60));
  ASSERT_TRUE(c.ok()) << c.status();
  Collective& group = **c;
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.size(), 1);
  EXPECT_TRUE(absl::StartsWith(group.Describe(), "nccl 2.")) << group.Describe();
  EXPECT_TRUE(absl::EndsWith(group.Describe(), " on GPU 0")) << group.Describe();
  // Rank 0 published the id (NCCL's 128 bytes) under the prefix.
  const std::map<std::string, std::string> published = store.values();
  ASSERT_EQ(published.count("gen1/nccl_unique_id"), 1u);
  EXPECT_EQ(published.at("gen1/nccl_unique_id").size(), 128u);

  // Grows the device buffer, then reuses it for a shorter span.
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20, size_t{37}}) {
    std::vector<float> data = TestValues(n, static_cast<uint32_t>(n));
    const std::vector<float> expected = ReferenceSum({data});
    ASSERT_TRUE(group.AllReduceSum(absl::MakeSpan(data)).ok()) << n;
    EXPECT_TRUE(BitIdentical(data, expected)) << n << " floats";
  }
  EXPECT_TRUE(group.AllReduceSum(absl::Span<float>()).ok());
}

TEST(NcclCollectiveTest, SingleRankBroadcast) {
  SKIP_WITHOUT_GPU();
  MapStore store;
  absl::StatusOr<std::unique_ptr<Collective>> c =
      CreateNcclCollective(&store, "gen2/", 0, 1, 0, absl::Seconds(60));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> data = TestValues(4097, 9);
  const std::vector<float> expected = data;
  ASSERT_TRUE((*c)->Broadcast(absl::MakeSpan(data), 0).ok());
  EXPECT_TRUE(BitIdentical(data, expected));
  // A root outside the group is the caller's mistake and leaves it usable.
  EXPECT_EQ((*c)->Broadcast(absl::MakeSpan(data), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Broadcast(absl::MakeSpan(data), -1).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> more = TestValues(100, 10);
  const std::vector<float> more_expected = ReferenceSum({more});
  ASSERT_TRUE((*c)->AllReduceSum(absl::MakeSpan(more)).ok());
  EXPECT_TRUE(BitIdentical(more, more_expected));
}

// Rank 0 publishes the id and joins; its peer never does. The non-blocking
// join is polled and aborted at the timeout.
TEST(NcclCollectiveTest, RankZeroWhosePeerNeverJoinsTimesOut) {
  SKIP_WITHOUT_GPU();
  MapStore store;
  absl::StatusOr<std::unique_ptr<Collective>> c =
      CreateNcclCollective(&store, "gen3/", 0, 2, 0, absl::Seconds(3));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_EQ(store.values().count("gen3/nccl_unique_id"), 1u);
}

TEST(NcclCollectiveTest, LocalGroupSumsOverItsDevices) {
  SKIP_WITHOUT_GPU();
  std::string why;
  const size_t gpus = Gpu()->ListGpus(&why).size();

  absl::StatusOr<std::unique_ptr<LocalNcclGroup>> one = CreateLocalNcclGroup({0});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->devices(), std::vector<int>({0}));
  EXPECT_TRUE(absl::EndsWith((*one)->Describe(), " on GPUs 0")) << (*one)->Describe();
  std::vector<float> data = TestValues(5000, 3);
  const std::vector<float> expected = ReferenceSum({data});
  ASSERT_TRUE((*one)->AllReduceSum({absl::MakeSpan(data)}).ok());
  EXPECT_TRUE(BitIdentical(data, expected));
  // One span per device, all of one length.
  EXPECT_EQ((*one)->AllReduceSum({}).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> other(5000);
  EXPECT_EQ((*one)->AllReduceSum({absl::MakeSpan(data), absl::MakeSpan(other)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateLocalNcclGroup({static_cast<int>(gpus)}).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // run_on_device.sh counts this skip apart from the others.
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs: the sum over several devices; this machine has " << gpus;
  std::vector<int> all;
  std::vector<std::vector<float>> members;
  for (size_t d = 0; d < gpus; ++d) {
    all.push_back(static_cast<int>(d));
    // Small integers: every order of summation gives the same floats.
    std::vector<float> v(3000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * (d + 3)) % 101) - 50;
    members.push_back(v);
  }
  const std::vector<float> sum = ReferenceSum(members);
  absl::StatusOr<std::unique_ptr<LocalNcclGroup>> group = CreateLocalNcclGroup(all);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<absl::Span<float>> spans;
  for (std::vector<float>& m : members) spans.push_back(absl::MakeSpan(m));
  ASSERT_TRUE((*group)->AllReduceSum(spans).ok());
  for (size_t d = 0; d < gpus; ++d) EXPECT_TRUE(BitIdentical(members[d], sum)) << "GPU " << d;
}

// One CUDA backend per device and, on each, one tensor per entry of
// `values[device]`, uploaded (queued, not waited for).
struct DeviceBuffers {
  std::vector<std::unique_ptr<compute::ComputeBackend>> backends;
  std::vector<std::vector<std::unique_ptr<compute::DeviceTensor>>> tensors;
  std::vector<std::vector<float*>> data;
  std::vector<void*> streams;
  std::vector<size_t> counts;

  static absl::StatusOr<DeviceBuffers> Make(
      const std::vector<int>& devices, const std::vector<std::vector<std::vector<float>>>& values) {
    DeviceBuffers b;
    for (size_t t = 0; t < values[0].size(); ++t) b.counts.push_back(values[0][t].size());
    for (size_t i = 0; i < devices.size(); ++i) {
      compute::CudaBackendOptions o;
      o.device = devices[i];
      o.memory_growth = true;
      PSC_ASSIGN_OR_RETURN(auto backend, Gpu()->CreateBackend(o));
      PSC_ASSIGN_OR_RETURN(compute::CudaQueue queue, Gpu()->Queue(backend.get()));
      b.streams.push_back(queue.stream);
      b.tensors.emplace_back();
      b.data.emplace_back();
      for (const std::vector<float>& v : values[i]) {
        PSC_ASSIGN_OR_RETURN(auto t, backend->Allocate({static_cast<int64_t>(v.size())}));
        PSC_RETURN_IF_ERROR(backend->CopyFromHost(v, t.get()));
        PSC_ASSIGN_OR_RETURN(float* p, Gpu()->TensorData(t.get()));
        b.data.back().push_back(p);
        b.tensors.back().push_back(std::move(t));
      }
      b.backends.push_back(std::move(backend));
    }
    return b;
  }

  std::vector<float> Read(size_t device, size_t t) {
    std::vector<float> out(counts[t]);
    const absl::Status s = backends[device]->CopyToHost(*tensors[device][t], absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
};

// The upload is queued on the backend's stream and the all-reduce is
// called at once: it must wait for that work, then sum in place. With one
// device (the single-rank NCCL of a machine with one GPU) the buffers come
// back unchanged; with several, each holds the sum.
TEST(NcclCollectiveTest, LocalGroupAllReducesDeviceMemoryInPlace) {
  SKIP_WITHOUT_GPU();
  std::string why;
  const size_t gpus = Gpu()->ListGpus(&why).size();

  absl::StatusOr<std::unique_ptr<LocalNcclGroup>> one = CreateLocalNcclGroup({0});
  ASSERT_TRUE(one.ok()) << one.status();
  // Grows past the staging of the host path, an empty buffer among them.
  const std::vector<std::vector<float>> values = {TestValues(1 << 20, 4), TestValues(37, 5), {}};
  absl::StatusOr<DeviceBuffers> b = DeviceBuffers::Make({0}, {values});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*one)->AllReduceSumOnDevice(b->data, b->counts, b->streams).ok());
  for (size_t t = 0; t < values.size(); ++t) {
    EXPECT_TRUE(BitIdentical(b->Read(0, t), values[t])) << "buffer " << t;
  }

  // The caller's mistakes, refused before anything is queued: the group
  // stays usable.
  const absl::StatusCode invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ((*one)->AllReduceSumOnDevice({}, b->counts, b->streams).code(), invalid);
  EXPECT_EQ((*one)->AllReduceSumOnDevice(b->data, b->counts, {}).code(), invalid);
  EXPECT_EQ((*one)->AllReduceSumOnDevice(b->data, {b->counts[0]}, b->streams).code(), invalid);
  EXPECT_EQ((*one)->AllReduceSumOnDevice({{nullptr}}, {5}, b->streams).code(), invalid);
  std::vector<float> host(64, 1.0f);
  const absl::Status on_host = (*one)->AllReduceSumOnDevice({{host.data()}}, {64}, b->streams);
  EXPECT_EQ(on_host.code(), invalid) << on_host;
  EXPECT_TRUE(absl::StrContains(on_host.message(), "not memory of GPU 0")) << on_host;
  EXPECT_TRUE((*one)->AllReduceSumOnDevice({{nullptr}}, {0}, b->streams).ok());
  ASSERT_TRUE((*one)->AllReduceSumOnDevice(b->data, b->counts, b->streams).ok());
  EXPECT_TRUE(BitIdentical(b->Read(0, 1), values[1]));

  // run_on_device.sh counts this skip apart from the others.
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs: the sum over several devices; this machine has " << gpus;
  std::vector<int> all;
  std::vector<std::vector<std::vector<float>>> members;
  for (size_t d = 0; d < gpus; ++d) {
    all.push_back(static_cast<int>(d));
    // Small integers: every order of summation gives the same floats.
    std::vector<float> a(3000), c(17);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * (d + 3)) % 101) - 50;
    for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(d * 7 + i);
    members.push_back({a, c});
  }
  absl::StatusOr<std::unique_ptr<LocalNcclGroup>> group = CreateLocalNcclGroup(all);
  ASSERT_TRUE(group.ok()) << group.status();
  absl::StatusOr<DeviceBuffers> many = DeviceBuffers::Make(all, members);
  ASSERT_TRUE(many.ok()) << many.status();
  // Buffers of device 0 passed as device 1's: not its memory.
  std::vector<std::vector<float*>> swapped = many->data;
  std::swap(swapped[0], swapped[1]);
  EXPECT_EQ((*group)->AllReduceSumOnDevice(swapped, many->counts, many->streams).code(), invalid);
  ASSERT_TRUE((*group)->AllReduceSumOnDevice(many->data, many->counts, many->streams).ok());
  for (size_t t = 0; t < 2; ++t) {
    std::vector<std::vector<float>> parts;
    for (size_t d = 0; d < gpus; ++d) parts.push_back(members[d][t]);
    const std::vector<float> sum = ReferenceSum(parts);
    for (size_t d = 0; d < gpus; ++d) {
      EXPECT_TRUE(BitIdentical(many->Read(d, t), sum)) << "GPU " << d << " buffer " << t;
    }
  }
}

}  // namespace
}  // namespace collective
}  // namespace psc
