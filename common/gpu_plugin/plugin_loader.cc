#include "common/gpu_plugin/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace psc {
namespace gpu {
namespace {

std::string DlError() {
  const char* e = dlerror();
  return e == nullptr ? "unknown error" : e;
}

}  // namespace

std::string DefaultGpuPluginPath() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return kGpuPluginFile;
  std::string dir(exe, static_cast<size_t>(n));
  dir.erase(dir.find_last_of('/') + 1);
  return dir + kGpuPluginFile;
}

absl::StatusOr<std::unique_ptr<GpuPlugin>> GpuPlugin::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("GPU plugin ", path, ": no such file"));
  }
  // RTLD_LOCAL: the plugin's CUDA, cuDNN and NCCL symbols stay its own.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU plugin ", path, ": cannot load: ", DlError()));
  }
  using Entry = const PscGpuPluginV1* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, PSC_GPU_PLUGIN_ENTRY));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU plugin ", path, ": not a pscluster GPU plugin (", DlError(), ")"));
  }
  const PscGpuPluginV1* plugin = entry();
  if (plugin == nullptr || plugin->abi_version != kGpuPluginAbiVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU plugin ", path, ": ABI version ", plugin == nullptr ? 0 : plugin->abi_version,
        ", this binary needs ", kGpuPluginAbiVersion, " (a plugin of another build)"));
  }
  if (std::string(plugin->interface_hash) != PSC_GPU_PLUGIN_INTERFACE_HASH) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU plugin ", path, ": built from other interface headers (", plugin->build,
                     "); rebuild it with this binary"));
  }
  std::unique_ptr<GpuApi> api;
  if (absl::Status s = plugin->create(&api); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("GPU plugin ", path, ": ", s.message()));
  }
  return std::unique_ptr<GpuPlugin>(new GpuPlugin(path, plugin->build, std::move(api)));
}

int DriverGpuCount(std::string* why) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    *why = absl::StrCat("no CUDA driver (", DlError(), ")");
    return -1;
  }
  using Init = int (*)(unsigned int);
  using Count = int (*)(int*);
  auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) {
    *why = "the CUDA driver lacks cuInit or cuDeviceGetCount";
    dlclose(driver);
    return -1;
  }
  if (int rc = init(0); rc != 0) {  // nothing was initialized: the driver goes again
    *why = absl::StrCat("the CUDA driver's cuInit failed (CUresult ", rc, ")");
    dlclose(driver);
    return -1;
  }
  // Initialized: the driver stays loaded (it may hold threads of its own, and
  // the plugin's runtime uses it next).
  int n = -1;
  if (int rc = count(&n); rc != 0) {
    *why = absl::StrCat("the CUDA driver's cuDeviceGetCount failed (CUresult ", rc, ")");
    return -1;
  }
  if (n == 0) *why = "the CUDA driver sees no device";
  return n;
}

}  // namespace gpu
}  // namespace psc
