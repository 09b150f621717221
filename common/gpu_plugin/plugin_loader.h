// Finding and loading the GPU plugin (gpu_api.h) on the host side: the only
// code outside the plugin that touches CUDA, and only through dlopen, so a
// binary that links this maps no CUDA library until a GPU is asked for.
#ifndef PSC_COMMON_GPU_PLUGIN_PLUGIN_LOADER_H_
#define PSC_COMMON_GPU_PLUGIN_PLUGIN_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gpu_plugin/gpu_api.h"

namespace psc {
namespace gpu {

// The plugin's file name: next to the binary by default.
inline constexpr char kGpuPluginFile[] = "libpsc_cuda_plugin.so";

// <the directory of the running binary>/libpsc_cuda_plugin.so.
std::string DefaultGpuPluginPath();

// A loaded plugin and its GpuApi. The shared object stays mapped for the
// life of the process (CUDA's libraries are not made to be unloaded); the
// destructor frees the GpuApi only. Thread-compatible; api() is as
// thread-safe as GpuApi.
class GpuPlugin {
 public:
  // dlopen(path), psc_backend_plugin_v1(), its ABI and interface checked,
  // then its GpuApi made. Errors name `path`:
  //   NOT_FOUND            no file at path
  //   FAILED_PRECONDITION  dlopen failed (dlerror(), e.g. a CUDA library
  //                        missing), no entry point (not a pscluster GPU
  //                        plugin), another ABI version or interface hash
  //                        (a plugin of another build), or the plugin's own
  //                        "no usable GPU: <the CUDA runtime's reason>"
  static absl::StatusOr<std::unique_ptr<GpuPlugin>> Load(const std::string& path);

  // A GpuApi of the caller's as a loaded plugin (a fake, in tests).
  static std::unique_ptr<GpuPlugin> FromApi(std::unique_ptr<GpuApi> api, std::string path) {
    return std::unique_ptr<GpuPlugin>(new GpuPlugin(std::move(path), "in process", std::move(api)));
  }

  GpuApi* api() const { return api_.get(); }
  const std::string& path() const { return path_; }
  // The plugin's build: "pscluster 0.1.0 (<commit>), CUDA runtime 13.0".
  const std::string& build() const { return build_; }

 private:
  GpuPlugin(std::string path, std::string build, std::unique_ptr<GpuApi> api)
      : path_(std::move(path)), build_(std::move(build)), api_(std::move(api)) {}
  const std::string path_;
  const std::string build_;
  const std::unique_ptr<GpuApi> api_;
};

// The GPUs the CUDA driver reports, through libcuda.so.1's cuInit and
// cuDeviceGetCount alone (no CUDA runtime, no plugin): the count, or -1
// with *why set when there is no driver or it fails (0, with *why, when it
// sees none). Where there is no driver nothing stays mapped, nor where its
// cuInit fails (no device); a driver that initialized stays loaded.
int DriverGpuCount(std::string* why);

}  // namespace gpu
}  // namespace psc

#endif  // PSC_COMMON_GPU_PLUGIN_PLUGIN_LOADER_H_
