// The preprocessing a job applies to its examples, and the Keras layer at a
// model's input that says the same: a model's own Rescaling or
// Normalization layer becomes the job's preprocessing (the examples are
// read through it), and the job's preprocessing is written into an
// exported model as such a layer, so that Keras's predict on raw inputs is
// what pscluster trained and `pscluster predict` computes.
#ifndef PSC_COMMON_JOB_INPUT_PREPROCESSING_H_
#define PSC_COMMON_JOB_INPUT_PREPROCESSING_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/data/numpy_images.h"

namespace psc {
namespace job {

// The examples read through `t` as Keras computes it in float32:
// x * scale + offset, or (x - mean) / max(sqrt(variance), 1e-7).
data::Preprocessing PreprocessingOf(const compute::InputTransform& t);

// `config_json` (a Keras model config: Sequential, or Functional in Keras
// 3's or Keras 2's form, whose input may feed several layers: they all take
// the new layer instead) with `p` as a Rescaling or Normalization layer
// right after its input, named "pscluster_preprocessing"; the same config
// when `p` is kNone. INVALID_ARGUMENT for a config it cannot place
// the layer in.
absl::StatusOr<std::string> WithInputLayer(const std::string& config_json,
                                           const data::Preprocessing& p);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_INPUT_PREPROCESSING_H_
