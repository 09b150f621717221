// Tests only: this build's GPU plugin, loaded once per test binary from
// beside it (as the worker loads it: <build>/bin, or the GPU bundle's bin/),
// or why a GPU test must skip.
#ifndef PSC_COMMON_GPU_PLUGIN_TESTING_TEST_PLUGIN_H_
#define PSC_COMMON_GPU_PLUGIN_TESTING_TEST_PLUGIN_H_

#include <string>

#include "common/gpu_plugin/gpu_api.h"

namespace psc {
namespace gpu {
namespace testing {

// Where the plugin is: beside the test binary.
std::string PluginPath();

// Whether this build made the plugin (nvcc was found).
bool PluginBuilt();

// The loaded plugin's GpuApi, or null with *why_not ("the GPU plugin is not
// built", the loader's error: "no usable GPU: ..."). Thread-safe.
GpuApi* TestGpu(std::string* why_not = nullptr);

}  // namespace testing
}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_PLUGIN_TESTING_TEST_PLUGIN_H_
