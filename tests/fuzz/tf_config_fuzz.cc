// TF_CONFIG as a daemon reads it: anything that parses must also print and
// validate without failing.
#include <cstddef>
#include <cstdint>

#include "common/cluster/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = psc::cluster::ClusterConfig::Parse(text);
  if (!config.ok()) return 0;
  (void)config->ValidateForTraining();
  (void)config->ClusterJson();
  (void)config->DryRunJson();
  return 0;
}
