// Tests only: a GpuApi without a GPU, for the worker's GPU paths on a
// machine without one: it lists the GPUs it is given, says no backend, tensor
// or stream is a CUDA one (INVALID_ARGUMENT, as the plugin says of a CPU
// backend's), and makes nothing (UNIMPLEMENTED).
#ifndef PSC_COMMON_GPU_PLUGIN_TESTING_FAKE_GPU_API_H_
#define PSC_COMMON_GPU_PLUGIN_TESTING_FAKE_GPU_API_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gpu_plugin/gpu_api.h"

namespace psc {
namespace gpu {
namespace testing {

class FakeGpuApi : public GpuApi {
 public:
  explicit FakeGpuApi(std::vector<GpuInfo> gpus = {}) : gpus_(std::move(gpus)) {}

  std::vector<GpuInfo> ListGpus(std::string* why_none) override {
    if (gpus_.empty() && why_none != nullptr) *why_none = "the fake has no GPU";
    return gpus_;
  }
  std::string LibraryVersions() override { return "fake"; }
  absl::Status SelfTest(int) override { return Unimplemented(); }
  absl::StatusOr<std::unique_ptr<compute::ComputeBackend>> CreateBackend(
      const compute::CudaBackendOptions&) override {
    return Unimplemented();
  }
  absl::StatusOr<compute::CudaMemoryStats> MemoryStats(const compute::ComputeBackend& b) override {
    return NotCuda(b);
  }
  absl::StatusOr<std::vector<std::string>> DescribeConvAlgorithms(
      const compute::ComputeBackend& b) override {
    return NotCuda(b);
  }
  absl::Status Synchronize(compute::ComputeBackend* b) override { return NotCuda(*b); }
  absl::Status ReduceIntoOnDevice(
      compute::ComputeBackend* b, const std::vector<compute::DeviceTensor*>&,
      const std::vector<compute::ComputeBackend*>&,
      const std::vector<std::vector<const compute::DeviceTensor*>>&) override {
    return NotCuda(*b);
  }
  absl::StatusOr<compute::CudaQueue> Queue(compute::ComputeBackend* b) override {
    return NotCuda(*b);
  }
  absl::StatusOr<float*> TensorData(compute::DeviceTensor*) override {
    return absl::InvalidArgumentError("not a CUDA backend's tensor");
  }
  absl::Status ScaleOnDevice(compute::ComputeBackend* b, const std::vector<compute::DeviceTensor*>&,
                             float) override {
    return NotCuda(*b);
  }
  absl::StatusOr<std::unique_ptr<collective::Collective>> CreateNcclCollective(
      collective::KeyValueStore*, const std::string&, int, int, int, absl::Duration) override {
    return Unimplemented();
  }
  absl::StatusOr<std::unique_ptr<collective::LocalNcclGroup>> CreateLocalNcclGroup(
      const std::vector<int>&) override {
    return Unimplemented();
  }

 private:
  static absl::Status Unimplemented() { return absl::UnimplementedError("the fake GPU API"); }
  static absl::Status NotCuda(const compute::ComputeBackend& b) {
    return absl::InvalidArgumentError(absl::StrCat(b.name(), " is not a CUDA backend"));
  }
  const std::vector<GpuInfo> gpus_;
};

}  // namespace testing
}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_PLUGIN_TESTING_FAKE_GPU_API_H_
