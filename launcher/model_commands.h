// `pscluster describe` and `pscluster export`: a model file looked at and a
// checkpoint turned back into Keras files, without a cluster.
#ifndef PSC_LAUNCHER_MODEL_COMMANDS_H_
#define PSC_LAUNCHER_MODEL_COMMANDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/keras/input_dims.h"

namespace psc {
namespace launcher {

// The model as Keras's summary() prints it (layer (type), output shape,
// parameters; totals), its input and output, the initializers, and where
// each variable would be placed over `num_shards` parameter servers (the
// chief's placement, placement.h). INVALID_ARGUMENT for num_shards < 1.
// `loss`: the compile config's (Keras's name), "" when none; a regression's
// output is described as values, not classes.
absl::StatusOr<std::string> DescribeModel(const compute::Model& model, int num_shards,
                                          const std::string& loss = "");

// --model's value (seed_cnn, mlp, FILE.keras, FILE.json) as a model and its
// Keras config, its inputs' None dimensions fixed from `data` (input_dims.h;
// null: no data, and such a model is refused). INVALID_ARGUMENT naming the
// file and what is wrong.
struct LoadedModel {
  compute::Model model;
  std::string config_json;
};
absl::StatusOr<LoadedModel> LoadModel(const std::string& model,
                                      const keras::InputDataShape& data = nullptr);

// Writes the variables of the checkpoint at `step` (-1: the newest
// complete one) in `checkpoint_dir` to `out` (.keras: an archive Keras
// loads; .weights.h5: for model.load_weights), for `model`. Returns the
// step exported. NOT_FOUND when the directory holds no complete checkpoint
// (or not that step); the checkpoint reader's errors (DATA_LOSS,
// FAILED_PRECONDITION for another model) otherwise.
absl::StatusOr<int64_t> ExportCheckpoint(const std::string& checkpoint_dir, int64_t step,
                                         const LoadedModel& model, const std::string& out);

// `model`'s outputs (Keras's predict: logits, or probabilities for a model
// ending in a softmax) on every example of the array `x` of the .npz (or the
// .npy itself) at `data`, taken as they are (no preprocessing), with the
// variables of the .keras archive `weights` (its model.weights.h5), written
// to `out` as a float32 .npy of (N, classes). Returns N. INVALID_ARGUMENT
// for examples of another shape than the model's input, an archive without
// weights or with weights of another model; the readers' errors otherwise.
absl::StatusOr<int64_t> PredictArray(const LoadedModel& model, const std::string& weights,
                                     const std::string& data, const std::string& x,
                                     const std::string& out);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_MODEL_COMMANDS_H_
