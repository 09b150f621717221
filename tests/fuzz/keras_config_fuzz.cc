// A Keras model config (model.to_json(), a .keras archive's config.json) as
// --model reads it: parsed into a model, and what describe and the
// weights' layout read of it computed, and the ops of a batch listed. Never
// allocates the variables.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/keras/keras_config.h"
#include "common/keras/keras_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto model = psc::keras::ModelFromKerasConfig(text, "fuzz.json");
  if (!model.ok()) return 0;
  int64_t total = 0;
  for (const auto& row : model->summary()) total += row.params;
  if (total != model->num_parameters()) __builtin_trap();  // the summary adds up
  // One .weights.h5 path per variable, each layer's variables where the
  // executor looks for them, and the op list of a batch (shapes only).
  if (psc::keras::VariablePaths(*model).size() != model->variables().size()) __builtin_trap();
  if (model->moving_averages().size() != model->variables().size()) __builtin_trap();
  const int variables = static_cast<int>(model->variables().size());
  for (const auto& v : model->layer_variables()) {
    for (int i : {v.kernel, v.bias, v.gamma, v.beta, v.mean, v.variance}) {
      if (i < -1 || i >= variables) __builtin_trap();
    }
  }
  (void)psc::compute::ModelOpSpecs(*model, 2);
  for (const auto& init : model->initializers()) (void)init.Text();
  return 0;
}
