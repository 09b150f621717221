// Where Keras 3 keeps each layer's variables in a .weights.h5 file
// (keras/src/saving/saving_lib.py): a model's layers are a container, and a
// container names its members by their class in snake case, numbered per
// class in order ("layers/conv2d", "layers/conv2d_1", "layers/dense"), not by
// the layer's own name. A layer's variables are the datasets "0", "1", ...
// of its "vars" group, in the order Keras creates them (kernel, bias; gamma,
// beta, moving_mean, moving_variance). Pure.
#ifndef PSC_COMMON_KERAS_KERAS_PATHS_H_
#define PSC_COMMON_KERAS_KERAS_PATHS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/compute/model.h"

namespace psc {
namespace keras {

// Keras's naming.to_snake_case: "Conv2D" -> "conv2d", "MaxPooling2D" ->
// "max_pooling2d", "ReLU" -> "re_lu", "BatchNormalization" ->
// "batch_normalization".
std::string SnakeCase(absl::string_view class_name);

// The group of every layer of `model`'s summary ("layers/conv2d", ...), in
// summary order.
std::vector<std::string> LayerGroups(const compute::Model& model);

// The dataset of each of model.variables(): "layers/conv2d/vars/0" (the
// kernel), "layers/conv2d/vars/1" (the bias), "layers/batch_normalization/
// vars/0" (gamma), ...; a layer with sublayers (SummaryRow::sublayers)
// keeps them in theirs: "layers/multi_head_attention/query_dense/vars/0".
std::vector<std::string> VariablePaths(const compute::Model& model);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_KERAS_PATHS_H_
