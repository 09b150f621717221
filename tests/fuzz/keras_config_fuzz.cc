// A Keras model config (model.to_json(), a .keras archive's config.json) as
// --model reads it: parsed into a model, and what describe and the
// weights' layout read of it computed. Never allocates the variables.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/compute/keras_config.h"
#include "common/keras/keras_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto model = psc::compute::ModelFromKerasConfig(text, "fuzz.json");
  if (!model.ok()) return 0;
  int64_t total = 0;
  for (const auto& row : model->summary()) total += row.params;
  if (total != model->num_parameters()) __builtin_trap();  // the summary adds up
  (void)psc::keras::VariablePaths(*model);
  for (const auto& init : model->initializers()) (void)init.Text();
  return 0;
}
