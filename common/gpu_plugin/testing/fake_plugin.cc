// Tests only: shared objects that look like the GPU plugin to the loader but
// are not right, one per compile-time variant (gpu_plugin/CMakeLists.txt):
// another ABI version (PSC_FAKE_ABI), other interface headers
// (PSC_FAKE_HASH), a factory that finds no GPU (neither).
#include <memory>

#include "common/gpu_plugin/gpu_api.h"

namespace {

absl::Status Create(std::unique_ptr<psc::gpu::GpuApi>* api) {
  return absl::FailedPreconditionError("no usable GPU: the fake plugin has none");
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PscGpuPluginV1* psc_backend_plugin_v1(
    void) {
  static const PscGpuPluginV1 plugin = {PSC_FAKE_ABI, PSC_FAKE_HASH, "fake plugin", &Create};
  return &plugin;
}
