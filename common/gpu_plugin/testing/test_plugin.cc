#include "common/gpu_plugin/testing/test_plugin.h"

#include <memory>

#include "common/gpu_plugin/plugin_loader.h"

namespace psc {
namespace gpu {
namespace testing {
namespace {

struct Loaded {
  std::unique_ptr<GpuPlugin> plugin;
  std::string why_not;
};

const Loaded& Load() {
  static const Loaded* const loaded = [] {
    auto* l = new Loaded;
    if (!PluginBuilt()) {
      l->why_not = "the GPU plugin is not built (no nvcc)";
      return l;
    }
    auto plugin = GpuPlugin::Load(PluginPath());
    if (plugin.ok()) {
      l->plugin = *std::move(plugin);
    } else {
      l->why_not = std::string(plugin.status().message());
    }
    return l;
  }();
  return *loaded;
}

}  // namespace

std::string PluginPath() { return DefaultGpuPluginPath(); }

bool PluginBuilt() { return PSC_HAVE_GPU_PLUGIN != 0; }

GpuApi* TestGpu(std::string* why_not) {
  const Loaded& l = Load();
  if (why_not != nullptr) *why_not = l.why_not;
  return l.plugin == nullptr ? nullptr : l.plugin->api();
}

}  // namespace testing
}  // namespace gpu
}  // namespace psc
