#include "launcher/model_commands.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/compute/cpu_backend.h"
#include "common/data/npy.h"
#include "common/data/numpy_file.h"
#include "common/data/numpy_images.h"
#include "common/data/packed_inputs.h"
#include "common/io/file_system.h"
#include "common/job/input_preprocessing.h"
#include "common/job/job_export.h"
#include "common/job/job_loss.h"
#include "common/keras/builtin_models.h"
#include "common/keras/keras_archive.h"
#include "common/keras/keras_config.h"
#include "common/keras/weights_h5.h"
#include "common/placement/placement.h"
#include "evaluator/checkpoint_evaluator.h"
#include "evaluator/checkpoint_reader.h"

namespace psc {
namespace launcher {
namespace {

std::string Shape(const compute::Shape& s) {
  std::vector<std::string> dims = {"None"};
  for (int64_t d : s) dims.push_back(absl::StrCat(d));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

// 1234567 -> "1,234,567", as Keras prints counts.
std::string Thousands(int64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> DescribeModel(const compute::Model& model, int num_shards,
                                          const std::string& loss) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--ps=", num_shards, ": must be >= 1"));
  }
  PSC_ASSIGN_OR_RETURN(const proto::Placement placement,
                       placement::PlaceVariables(model.variables(), {num_shards}));
  std::string out = absl::StrFormat("Model: \"%s\"\n", model.name());
  const std::string rule(78, '=');
  absl::StrAppendFormat(&out, "%-36s %-26s %14s\n%s\n", "Layer (type)", "Output Shape", "Param #",
                        rule);
  for (const compute::SummaryRow& r : model.summary()) {
    absl::StrAppendFormat(&out, "%-36s %-26s %14s\n",
                          absl::StrCat(r.name, " (", r.keras_class, ")"), Shape(r.output),
                          Thousands(r.params));
  }
  const int64_t total = model.num_parameters();
  int64_t moving = 0;  // BatchNormalization's moving statistics and frozen layers': not trained
  for (size_t i = 0; i < model.variables().size(); ++i) {
    if (model.moving_averages()[i]) moving += compute::ShapeSize(model.variables()[i].shape);
  }
  absl::StrAppendFormat(&out,
                        "%s\nTotal params: %s (%.2f MB)\nTrainable params: %s\nNon-trainable "
                        "params: %s\n",
                        rule, Thousands(total), total * 4.0 / (1 << 20), Thousands(total - moving),
                        Thousands(moving));
  std::string input = absl::StrCat(Shape(model.input_shape()), " float32");
  if (!model.inputs().empty()) {
    std::vector<std::string> each;
    for (const compute::ModelInput& in : model.inputs()) {
      each.push_back(absl::StrCat(in.name, " ", Shape(in.shape),
                                  in.id_limit > 0 ? absl::StrCat(" ids < ", in.id_limit) : ""));
    }
    input =
        absl::StrCat(model.inputs().size(), model.inputs().size() == 1 ? " input: " : " inputs: ",
                     absl::StrJoin(each, ", "), " (float32 but for ids, read from integers)");
  }
  const std::string act = model.output_activation();
  proto::LossSpec spec;
  spec.set_name(loss);
  if (job::IsRegressionLoss(spec)) {
    absl::StrAppendFormat(&out, "\nInput: %s. Output: %d unit%s (%s), a regression (%s).\n", input,
                          model.classes(), model.classes() == 1 ? "" : "s", act, loss);
  } else if (act == "linear" || act == "softmax") {
    absl::StrAppendFormat(
        &out, "\nInput: %s. Output: %d %s (%s).\n", input, model.classes(),
        model.classes() == 1 ? "unit" : "classes",
        act == "softmax" ? "softmax probabilities; trained on their logits" : "logits");
  } else {
    absl::StrAppendFormat(&out, "\nInput: %s. Output: %d unit%s (%s).\n", input, model.classes(),
                          model.classes() == 1 ? "" : "s", act);
  }
  absl::StrAppendFormat(&out, "\nVariables over %d parameter server%s (--ps=%d):\n", num_shards,
                        num_shards == 1 ? "" : "s", num_shards);
  std::vector<int64_t> bytes(num_shards, 0);
  for (int i = 0; i < placement.variables_size(); ++i) {
    const proto::VariablePlacement& v = placement.variables(i);
    std::vector<std::string> parts;
    const int64_t row_bytes =
        4 * compute::ShapeSize(model.variables()[i].shape) / std::max<int64_t>(1, v.shape(0));
    for (const auto& p : v.parts()) {
      bytes[p.shard()] += row_bytes * p.first_axis_size();
      parts.push_back(v.parts_size() == 1
                          ? absl::StrCat("ps:", p.shard())
                          : absl::StrCat("ps:", p.shard(), " rows ", p.first_axis_offset(), "-",
                                         p.first_axis_offset() + p.first_axis_size() - 1));
    }
    const std::optional<float> moving_average = model.moving_averages()[i];
    absl::StrAppendFormat(&out, "  %-28s %-18s %-22s %s%s\n", v.name(),
                          compute::ShapeText(model.variables()[i].shape),
                          model.initializers()[i].Text(), absl::StrJoin(parts, ", "),
                          !moving_average ? ""
                          : *moving_average == 1.0f
                              ? "  (frozen: trainable=False)"
                              : absl::StrCat("  (moving average, momentum ", *moving_average, ")"));
  }
  for (int s = 0; s < num_shards; ++s) {
    absl::StrAppendFormat(&out, "  ps:%d holds %s bytes\n", s, Thousands(bytes[s]));
  }
  return out;
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& model, const keras::InputDataShape& data) {
  if (!keras::IsModelFile(model)) {
    PSC_ASSIGN_OR_RETURN(compute::Model m, keras::BuiltinModel(model));
    return LoadedModel{std::move(m), keras::BuiltinModelConfig(model)};
  }
  absl::StatusOr<std::string> config = keras::ReadModelConfig(model);
  if (config.ok()) config = keras::FixOpenInputDims(*config, model, data);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().message());
  PSC_ASSIGN_OR_RETURN(compute::Model m, keras::ModelFromKerasConfig(*config, model));
  return LoadedModel{std::move(m), *std::move(config)};
}

absl::StatusOr<int64_t> ExportCheckpoint(const std::string& checkpoint_dir, int64_t step,
                                         const LoadedModel& model, const std::string& out) {
  job::ExportOptions options;
  if (absl::EndsWith(out, ".weights.h5")) {
    options.weights = out;
  } else {
    options.keras = out;
  }
  if (absl::Status s = job::CheckExportOptions(options); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out=", out,
                     ": must end in .keras or .weights.h5, in a directory that "
                     "exists"));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<checkpoint::CompleteCheckpoint> all,
                       checkpoint::ListCompleteCheckpoints(checkpoint_dir));
  const checkpoint::CompleteCheckpoint* chosen = nullptr;
  for (const auto& c : all) {
    if (step < 0 || c.step == step) chosen = &c;  // ascending: the last is the newest
  }
  if (chosen == nullptr) {
    return absl::NotFoundError(
        step < 0 ? absl::StrCat(checkpoint_dir, " holds no complete checkpoint")
                 : absl::StrCat(checkpoint_dir, " holds no complete checkpoint at step ", step));
  }
  // Read by ranges as the file is written: a table a chunk at a time.
  PSC_ASSIGN_OR_RETURN(
      std::unique_ptr<evaluator::CheckpointReader> reader,
      evaluator::CheckpointReader::Open(checkpoint_dir, *chosen, model.model.variables()));
  PSC_RETURN_IF_ERROR(job::ExportModel(options, model.config_json, model.model, reader.get()));
  return chosen->step;
}

// The model's several inputs as the data packs them.
std::vector<data::PackedInput> PackedInputsOf(const compute::Model& model) {
  std::vector<data::PackedInput> out;
  for (const compute::ModelInput& in : model.inputs())
    out.push_back({in.name, in.shape, in.offset, in.id_limit, in.table, in.mask});
  return out;
}

absl::StatusOr<int64_t> PredictArray(const LoadedModel& model, const std::string& weights,
                                     const std::string& data, const std::string& x,
                                     const std::string& out) {
  PSC_ASSIGN_OR_RETURN(const keras::KerasArchive archive,
                       keras::ReadKerasArchive(weights, model.model));
  if (archive.weights_h5.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(weights, " holds no model.weights.h5"));
  }
  PSC_ASSIGN_OR_RETURN(
      const std::vector<std::vector<float>> params,
      keras::ReadWeightsH5(archive.weights_h5, model.model, absl::StrCat(weights, ": weights")));
  data::NumpyArray array;
  const std::vector<compute::ModelInput>& inputs = model.model.inputs();
  if (absl::EndsWith(data, ".npy")) {
    if (!inputs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(data, ": the model has ", inputs.size(),
                       " inputs (or one of ids); give an .npz with one array each (",
                       data::PackedArrayNames(x, PackedInputsOf(model.model)), ")"));
    }
    PSC_ASSIGN_OR_RETURN(array, data::ReadNpyFile(data));
  } else {
    PSC_ASSIGN_OR_RETURN(auto arrays, data::ReadNpzFile(data));
    if (!inputs.empty()) {
      // One array per input, packed as the model's input takes them.
      absl::StatusOr<data::NumpyArray> packed =
          data::PackInputs(arrays, x, PackedInputsOf(model.model), data);
      if (!packed.ok()) return absl::InvalidArgumentError(packed.status().message());
      array = *std::move(packed);
    } else {
      const auto it = arrays.find(x);
      if (it == arrays.end()) {
        return absl::InvalidArgumentError(absl::StrCat(data, " has no array '", x, "'"));
      }
      array = it->second;
    }
  }
  const compute::Shape& input = model.model.input_shape();
  PSC_RETURN_IF_ERROR(data::CheckExamples(array, input, absl::StrCat(data, ": ", x)));
  const int64_t n = array.header().shape[0];
  PSC_ASSIGN_OR_RETURN(auto backend, compute::CreateCpuBackend(0));
  PSC_ASSIGN_OR_RETURN(auto executor, compute::Executor::Create(&model.model, backend.get()));
  PSC_RETURN_IF_ERROR(executor->SetParameters(params));
  const int64_t classes = model.model.classes(), per = model.model.input_elements();
  constexpr int64_t kBatch = 256;
  std::string bytes = data::MakeNpyHeader(data::NpyType::kFloat32, {n, classes});
  std::vector<float> in, outputs;
  for (int64_t first = 0; first < n; first += kBatch) {
    const int64_t len = std::min(kBatch, n - first);
    in.resize(static_cast<size_t>(len * per));
    // Raw inputs, through the model's own Rescaling or Normalization layer
    // (an export of a job carries the job's preprocessing as one).
    data::ReadExamples(array, job::PreprocessingOf(model.model.input_transform()), first, len,
                       in.data());
    PSC_RETURN_IF_ERROR(executor->Predict(in, &outputs));
    bytes.append(reinterpret_cast<const char*>(outputs.data()), outputs.size() * sizeof(float));
  }
  PSC_RETURN_IF_ERROR(io::LocalFileSystem()->WriteFileAtomically(out, bytes));
  return n;
}

}  // namespace launcher
}  // namespace psc
