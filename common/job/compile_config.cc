#include "common/job/compile_config.h"

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/optimizer/loss_scale.h"
#include "common/optimizer/optimizer.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

using Json = nlohmann::json;

const Json* Find(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// The value at `key`, null included; nullptr when there is no such key.
const Json* FindEvenNull(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

double Number(const Json* config, const char* key, double fallback) {
  const Json* j = config == nullptr ? nullptr : Find(*config, key);
  return j != nullptr && j->is_number() ? j->get<double>() : fallback;
}

// A serialized Keras object's class and config, or a bare name.
void ClassAndConfig(const Json& j, std::string* name, const Json** config) {
  *config = nullptr;
  if (j.is_string()) {
    *name = j.get<std::string>();
  } else if (const Json* cls = Find(j, "class_name"); cls != nullptr && cls->is_string()) {
    *name = cls->get<std::string>();
    *config = Find(j, "config");
  }
}

// Every key of `object` is in `known`; else INVALID_ARGUMENT naming the
// first other one and `where`.
absl::Status OnlyKnownKeys(const Json* object, const std::set<std::string>& known,
                           absl::string_view what, absl::string_view where) {
  if (object == nullptr || !object->is_object()) return absl::OkStatus();
  for (const auto& [key, value] : object->items()) {
    if (known.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: ", where, "'s option '", key,
          "' is not supported (pscluster does not know it, and would otherwise ignore it)"));
    }
  }
  return absl::OkStatus();
}

// Keras's names for the accuracy of the class ids pscluster reports as
// "accuracy", as compile() takes them; `onehot` (categorical_crossentropy):
// sparse_categorical_accuracy compares a class id with a row, which Keras
// refuses; categorical_accuracy of class ids compares argmaxes of a
// number, not the accuracy.
enum class AccuracyForm { kNotAccuracy, kAccuracy, kWrongForm };
// The labels' form, which the loss decides: class ids, one-hot rows, or one
// 0/1 label per example against one output unit (binary_crossentropy).
// A regression's float targets (kTargets) have no accuracy.
enum class LabelForm { kClassIds, kOneHot, kBinary, kTargets };
AccuracyForm Accuracy(const std::string& name, LabelForm form) {
  if (name == "accuracy" || name == "acc" || name == "Accuracy") {
    return form == LabelForm::kTargets ? AccuracyForm::kWrongForm : AccuracyForm::kAccuracy;
  }
  if (name == "sparse_categorical_accuracy" || name == "SparseCategoricalAccuracy") {
    return form == LabelForm::kClassIds ? AccuracyForm::kAccuracy : AccuracyForm::kWrongForm;
  }
  if (name == "categorical_accuracy" || name == "CategoricalAccuracy") {
    return form == LabelForm::kOneHot ? AccuracyForm::kAccuracy : AccuracyForm::kWrongForm;
  }
  return AccuracyForm::kNotAccuracy;
}

// The job's name of a Keras regression loss given by its string or class
// name ("mse", "MeanSquaredError", ...); "" for any other.
std::string RegressionLossName(const std::string& name) {
  if (name == "mse" || name == "MSE" || name == "mean_squared_error" ||
      name == "MeanSquaredError") {
    return "mean_squared_error";
  }
  if (name == "mae" || name == "MAE" || name == "mean_absolute_error" ||
      name == "MeanAbsoluteError") {
    return "mean_absolute_error";
  }
  if (name == "huber" || name == "Huber") return "huber";
  return "";
}

const char* LabelFormText(LabelForm form) {
  switch (form) {
    case LabelForm::kOneHot:
      return "one-hot labels (categorical_crossentropy)";
    case LabelForm::kBinary:
      return "0/1 labels of one output unit (binary_crossentropy)";
    case LabelForm::kTargets:
      return "a regression's float targets (mean_squared_error, mean_absolute_error, huber)";
    case LabelForm::kClassIds:
      break;
  }
  return "class ids (sparse_categorical_crossentropy)";
}

// A metric of compiled_metrics.h by Keras's string or class name.
struct MetricName {
  const char* string_name;
  const char* long_name;
  const char* class_name;
  proto::CompiledMetric::Kind kind;
};
constexpr MetricName kMetricNames[] = {
    {"mae", "mean_absolute_error", "MeanAbsoluteError", proto::CompiledMetric::MAE},
    {"mse", "mean_squared_error", "MeanSquaredError", proto::CompiledMetric::MSE},
    {"rmse", "root_mean_squared_error", "RootMeanSquaredError",
     proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR},
    {"precision", "precision", "Precision", proto::CompiledMetric::PRECISION},
    {"recall", "recall", "Recall", proto::CompiledMetric::RECALL},
    {"auc", "auc", "AUC", proto::CompiledMetric::AUC},
    {"binary_accuracy", "binary_accuracy", "BinaryAccuracy",
     proto::CompiledMetric::BINARY_ACCURACY},
};

// The config keys each metric class may have, and the value each must
// hold where only Keras's default runs (null: absent or null).
absl::Status CheckMetricConfig(proto::CompiledMetric::Kind kind, const std::string& cls,
                               const Json* config, absl::string_view what,
                               proto::CompiledMetric* out) {
  std::set<std::string> known = {"name", "dtype"};
  // key -> the only value run (JSON), Keras's default.
  std::vector<std::pair<std::string, Json>> fixed;
  switch (kind) {
    case proto::CompiledMetric::PRECISION:
    case proto::CompiledMetric::RECALL:
      fixed = {{"thresholds", nullptr}, {"top_k", nullptr}, {"class_id", nullptr}};
      break;
    case proto::CompiledMetric::AUC:
      known.insert("num_thresholds");
      fixed = {{"curve", "ROC"},           {"summation_method", "interpolation"},
               {"multi_label", false},     {"num_labels", nullptr},
               {"label_weights", nullptr}, {"from_logits", false},
               {"thresholds", nullptr}};
      break;
    case proto::CompiledMetric::BINARY_ACCURACY:
      fixed = {{"threshold", 0.5}};
      break;
    default:
      break;
  }
  for (const auto& [key, value] : fixed) known.insert(key);
  PSC_RETURN_IF_ERROR(OnlyKnownKeys(config, known, what, absl::StrCat("the metric ", cls)));
  if (config == nullptr) return absl::OkStatus();
  for (const auto& [key, value] : fixed) {
    const Json* got = FindEvenNull(*config, key.c_str());
    if (got == nullptr || *got == value) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the metric ", cls, "'s ", key, " ", got->dump(),
                     " is not supported (pscluster runs ", value.dump(), ", Keras's default)"));
  }
  if (const Json* d = Find(*config, "dtype");
      d != nullptr && !(d->is_string() && d->get<std::string>() == "float32")) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: the metric ", cls,
                                                   "'s dtype ", d->dump(),
                                                   " is not supported (float32)"));
  }
  if (const Json* t = Find(*config, "num_thresholds"); t != nullptr) {
    if (!t->is_number_integer() || t->get<int64_t>() < 2 || t->get<int64_t>() > 100000) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: the metric ", cls,
                                                     "'s num_thresholds ", t->dump(),
                                                     " is not an integer in [2, 100000]"));
    }
    out->set_num_thresholds(static_cast<int32_t>(t->get<int64_t>()));
  }
  if (const Json* n = Find(*config, "name"); n != nullptr && n->is_string()) {
    out->set_name(n->get<std::string>());
  }
  return absl::OkStatus();
}

// The `key` ("metrics" or "weighted_metrics") entries of a compile config:
// the accuracy (reported always) and compiled_metrics.h's; the rest is
// refused, naming the entry. Every metric but the accuracy compares each
// output with its label, so it needs labels of the outputs' shape (one-hot
// rows, or binary labels), as in Keras.
absl::StatusOr<std::vector<proto::CompiledMetric>> ReadMetrics(const Json* metrics,
                                                               absl::string_view what,
                                                               const char* key, LabelForm form) {
  std::vector<proto::CompiledMetric> out;
  if (metrics == nullptr) return out;
  const Json list = metrics->is_array() ? *metrics : Json::array({*metrics});
  for (const Json& m : list) {
    std::string name;
    const Json* config = nullptr;
    ClassAndConfig(m, &name, &config);
    const std::string shown = name.empty() ? m.dump() : name;
    if (std::string(key) != "metrics") {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: the ", key, " entry ", shown,
          " is not supported (weighted metrics are not computed; the compiled metrics are "
          "unweighted)"));
    }
    switch (Accuracy(name, form)) {
      case AccuracyForm::kAccuracy:
        continue;
      case AccuracyForm::kWrongForm:
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": compile_config: the metrics entry ", shown, " is not supported with ",
            LabelFormText(form),
            form == LabelForm::kTargets
                ? ": a regression has no accuracy (use mae, mse or root_mean_squared_error)"
                : ": Keras would compare labels and outputs of different shapes; use "
                  "\"accuracy\""));
      case AccuracyForm::kNotAccuracy:
        break;
    }
    const MetricName* known = nullptr;
    for (const MetricName& n : kMetricNames) {
      if (name == n.string_name || name == n.long_name || name == n.class_name) known = &n;
    }
    if (known == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: the metrics entry ", shown,
                       " is not supported (supported: accuracy; with one-hot or binary labels "
                       "also mae, mse, root_mean_squared_error, Precision, Recall, AUC, "
                       "binary_accuracy; for a regression mae, mse, root_mean_squared_error)"));
    }
    const bool error_metric = known->kind == proto::CompiledMetric::MAE ||
                              known->kind == proto::CompiledMetric::MSE ||
                              known->kind == proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR;
    if (form == LabelForm::kTargets && !error_metric) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: the metrics entry ", shown,
          " is not supported for a regression (supported: mae, mse, root_mean_squared_error)"));
    }
    if (form == LabelForm::kClassIds) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: the metrics entry ", shown,
          " needs one-hot labels (loss categorical_crossentropy) or binary ones "
          "(binary_crossentropy): on class ids Keras cannot compare a label with each output"));
    }
    proto::CompiledMetric c;
    c.set_kind(known->kind);
    c.set_name(name);  // a string: Keras's History key is the string itself
    if (known->kind == proto::CompiledMetric::AUC) c.set_num_thresholds(200);
    if (m.is_object()) {
      c.set_name(known->long_name);  // Keras's default name of the class
      PSC_RETURN_IF_ERROR(CheckMetricConfig(known->kind, name, config, what, &c));
    }
    for (const proto::CompiledMetric& e : out) {
      if (e.name() == c.name()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": compile_config: two metrics named ", c.name()));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

// A keras.optimizers.schedules object as the optimizer's learning_rate:
// ExponentialDecay, PiecewiseConstantDecay, CosineDecay (with warmup) into
// o's schedule, its initial rate into o's learning_rate.
absl::Status ReadSchedule(const Json& j, absl::string_view what, proto::OptimizerConfig* o) {
  using S = proto::LearningRateSchedule;
  std::string name;
  const Json* config = nullptr;
  ClassAndConfig(j, &name, &config);
  S* s = o->mutable_schedule();
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the learning-rate schedule ", name, ": ", why));
  };
  auto number = [&](const char* key, double fallback, double* out) -> absl::Status {
    const Json* v = config == nullptr ? nullptr : Find(*config, key);
    if (v == nullptr) {
      *out = fallback;
      return absl::OkStatus();
    }
    if (!v->is_number()) return bad(absl::StrCat(key, " ", v->dump(), " is not a number"));
    *out = v->get<double>();
    return absl::OkStatus();
  };
  auto numbers = [&](const char* key, google::protobuf::RepeatedField<double>* out) {
    const Json* v = config == nullptr ? nullptr : Find(*config, key);
    if (v == nullptr || !v->is_array()) return bad(absl::StrCat(key, " is not a list of numbers"));
    for (const Json& x : *v) {
      if (!x.is_number()) return bad(absl::StrCat(key, " is not a list of numbers"));
      out->Add(x.get<double>());
    }
    return absl::OkStatus();
  };
  double lr = 0;
  if (name == "ExponentialDecay") {
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(
        config, {"initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name"}, what,
        "the learning-rate schedule ExponentialDecay"));
    s->set_kind(S::EXPONENTIAL_DECAY);
    double steps = 0, rate = 0;
    PSC_RETURN_IF_ERROR(number("initial_learning_rate", 0, &lr));
    PSC_RETURN_IF_ERROR(number("decay_steps", 0, &steps));
    PSC_RETURN_IF_ERROR(number("decay_rate", 0, &rate));
    s->set_decay_steps(steps);
    s->set_decay_rate(rate);
    const Json* stair = config == nullptr ? nullptr : Find(*config, "staircase");
    s->set_staircase(stair != nullptr && stair->is_boolean() && stair->get<bool>());
  } else if (name == "PiecewiseConstantDecay") {
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(config, {"boundaries", "values", "name"}, what,
                                      "the learning-rate schedule PiecewiseConstantDecay"));
    s->set_kind(S::PIECEWISE_CONSTANT_DECAY);
    PSC_RETURN_IF_ERROR(numbers("boundaries", s->mutable_boundaries()));
    PSC_RETURN_IF_ERROR(numbers("values", s->mutable_values()));
    lr = s->values_size() > 0 ? s->values(0) : 0;
  } else if (name == "CosineDecay") {
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(
        config,
        {"initial_learning_rate", "decay_steps", "alpha", "name", "warmup_target", "warmup_steps"},
        what, "the learning-rate schedule CosineDecay"));
    s->set_kind(S::COSINE_DECAY);
    double steps = 0, alpha = 0, warmup = 0;
    PSC_RETURN_IF_ERROR(number("initial_learning_rate", 0, &lr));
    PSC_RETURN_IF_ERROR(number("decay_steps", 0, &steps));
    PSC_RETURN_IF_ERROR(number("alpha", 0, &alpha));
    PSC_RETURN_IF_ERROR(number("warmup_steps", 0, &warmup));
    s->set_decay_steps(steps);
    s->set_alpha(alpha);
    if (warmup != std::floor(warmup) || warmup < 0 || warmup > 1e15) {
      return bad(absl::StrCat("warmup_steps ", warmup, " is not a whole number >= 0"));
    }
    s->set_warmup_steps(static_cast<int64_t>(warmup));
    if (const Json* t = config == nullptr ? nullptr : Find(*config, "warmup_target");
        t != nullptr) {
      if (!t->is_number())
        return bad(absl::StrCat("warmup_target ", t->dump(), " is not a number"));
      s->set_warmup_target(t->get<double>());
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": compile_config: the learning-rate schedule ", name.empty() ? j.dump() : name,
        " is not supported (supported: ExponentialDecay, PiecewiseConstantDecay, CosineDecay; or "
        "give --learning_rate)"));
  }
  if (!(lr > 0)) return bad(absl::StrCat("the initial learning rate ", lr, " is not > 0"));
  o->set_learning_rate(lr);
  return absl::OkStatus();
}

// Keras's LossScaleOptimizer (what compile() holds under mixed_float16,
// saved only when the user wrapped the optimizer): its settings into
// *loss_scale, and the inner optimizer's JSON; any other optimizer is
// returned as it is.
absl::StatusOr<const Json*> UnwrapLossScale(const Json& j, absl::string_view what,
                                            std::optional<proto::LossScaleConfig>* loss_scale) {
  std::string name;
  const Json* config = nullptr;
  ClassAndConfig(j, &name, &config);
  if (name != "LossScaleOptimizer") return &j;
  // Older Keras 3 saves carry the base optimizer's keys too; at their
  // defaults they say nothing (LossScaleOptimizer supports none of them).
  PSC_RETURN_IF_ERROR(OnlyKnownKeys(
      config,
      {"name", "inner_optimizer", "initial_scale", "dynamic_growth_steps", "learning_rate",
       "weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "use_ema", "ema_momentum",
       "ema_overwrite_frequency", "loss_scale_factor", "gradient_accumulation_steps"},
      what, "the optimizer LossScaleOptimizer"));
  for (const char* key :
       {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "ema_overwrite_frequency",
        "loss_scale_factor", "gradient_accumulation_steps"}) {
    if (config != nullptr && Find(*config, key) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: the LossScaleOptimizer's ", key,
                       " is not supported (give it to its inner optimizer)"));
    }
  }
  if (const Json* ema = config == nullptr ? nullptr : Find(*config, "use_ema");
      ema != nullptr && !(ema->is_boolean() && !ema->get<bool>())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the LossScaleOptimizer's use_ema is not supported"));
  }
  const Json* inner = config == nullptr ? nullptr : Find(*config, "inner_optimizer");
  if (inner == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the LossScaleOptimizer has no inner_optimizer"));
  }
  proto::LossScaleConfig c = optimizer::KerasLossScale();
  for (const char* key : {"initial_scale", "dynamic_growth_steps"}) {
    const Json* v = Find(*config, key);
    if (v == nullptr) continue;
    if (!v->is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(what,
                                                     ": compile_config: the LossScaleOptimizer's ",
                                                     key, " ", v->dump(), " is not a number"));
    }
    const double x = v->get<double>();
    if (std::string(key) == "initial_scale") {
      c.set_initial_scale(x);
    } else if (x != std::floor(x) || !(x >= 1 && x <= 1e15)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: the LossScaleOptimizer's dynamic_growth_steps ",
                       v->dump(), " is not a whole number >= 1"));
    } else {
      c.set_growth_steps(static_cast<int64_t>(x));
    }
  }
  if (absl::Status s = optimizer::CheckLossScaleConfig(c); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the LossScaleOptimizer: ", s.message()));
  }
  *loss_scale = c;
  return inner;
}

absl::StatusOr<proto::OptimizerConfig> Optimizer(const Json& j, absl::string_view what) {
  std::string name;
  const Json* config = nullptr;
  ClassAndConfig(j, &name, &config);
  const std::string lower = absl::AsciiStrToLower(name);
  proto::OptimizerConfig o;
  {
    // Keras 3.15's SGD and Adam configs, and Keras 2's extras.
    std::set<std::string> known = {"name",
                                   "learning_rate",
                                   "weight_decay",
                                   "clipnorm",
                                   "global_clipnorm",
                                   "clipvalue",
                                   "use_ema",
                                   "ema_momentum",
                                   "ema_overwrite_frequency",
                                   "loss_scale_factor",
                                   "gradient_accumulation_steps",
                                   "jit_compile",
                                   "is_legacy_optimizer"};
    if (lower == "sgd") known.insert({"momentum", "nesterov"});
    if (lower == "adam" || lower == "adamw")
      known.insert({"beta_1", "beta_2", "epsilon", "amsgrad"});
    if (lower == "rmsprop") known.insert({"rho", "momentum", "epsilon", "centered"});
    if (lower == "adagrad") known.insert({"initial_accumulator_value", "epsilon"});
    if (lower == "ftrl") {
      known.insert({"learning_rate_power", "initial_accumulator_value",
                    "l1_regularization_strength", "l2_regularization_strength",
                    "l2_shrinkage_regularization_strength", "beta"});
    }
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(config, known, what, absl::StrCat("the optimizer ", name)));
  }
  const Json* schedule = nullptr;
  if (config != nullptr) {
    if (const Json* lr = Find(*config, "learning_rate"); lr != nullptr && !lr->is_number()) {
      schedule = lr;
    }
  }
  // What would change the update and that we do not run: refused, not ignored.
  for (const char* key : {"loss_scale_factor", "gradient_accumulation_steps"}) {
    if (config != nullptr && Find(*config, key) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: the optimizer's ", key, " is not supported"));
    }
  }
  if (config != nullptr && Find(*config, "use_ema") != nullptr &&
      Find(*config, "use_ema")->is_boolean() && Find(*config, "use_ema")->get<bool>()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the optimizer's use_ema is not supported"));
  }
  o.set_learning_rate(Number(config, "learning_rate", 0));
  if (schedule != nullptr) PSC_RETURN_IF_ERROR(ReadSchedule(*schedule, what, &o));
  // Keras 3's decoupled weight decay (null: none; AdamW writes its 0.004).
  if (const Json* wd = config == nullptr ? nullptr : Find(*config, "weight_decay"); wd != nullptr) {
    if (!wd->is_number() || !(wd->get<double>() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: the optimizer's weight_decay ", wd->dump(),
                       " is not a number >= 0"));
    }
    o.set_weight_decay(wd->get<double>());
  }
  // Keras's clipping: of each gradient, or of all of them by their norm.
  for (const char* key : {"clipvalue", "clipnorm", "global_clipnorm"}) {
    const Json* v = config == nullptr ? nullptr : Find(*config, key);
    if (v == nullptr) continue;
    if (!v->is_number() || !(v->get<double>() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: the optimizer's ",
                                                     key, " ", v->dump(), " is not a number >= 0"));
    }
    if (std::string(key) == "clipvalue") {
      o.set_clipvalue(v->get<double>());
    } else if (std::string(key) == "clipnorm") {
      o.set_clipnorm(v->get<double>());
    } else {
      o.set_global_clipnorm(v->get<double>());
    }
  }
  auto flag = [&](const char* key) {
    const Json* j = config == nullptr ? nullptr : Find(*config, key);
    return j != nullptr && j->is_boolean() && j->get<bool>();
  };
  if (lower == "sgd") {
    const double momentum = Number(config, "momentum", 0);
    const bool nesterov = config != nullptr && Find(*config, "nesterov") != nullptr &&
                          Find(*config, "nesterov")->is_boolean() &&
                          Find(*config, "nesterov")->get<bool>();
    o.set_kind(momentum > 0 ? proto::OptimizerConfig::MOMENTUM : proto::OptimizerConfig::SGD);
    if (momentum > 0) {
      o.set_momentum(momentum);
      o.set_nesterov(nesterov);
    }
  } else if (lower == "adam" || lower == "adamw") {
    o.set_kind(lower == "adam" ? proto::OptimizerConfig::ADAM : proto::OptimizerConfig::ADAMW);
    o.set_beta_1(Number(config, "beta_1", 0.9));
    o.set_beta_2(Number(config, "beta_2", 0.999));
    o.set_epsilon(Number(config, "epsilon", 1e-7));
    if (config != nullptr && Find(*config, "amsgrad") != nullptr &&
        Find(*config, "amsgrad")->is_boolean() && Find(*config, "amsgrad")->get<bool>()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: Adam with amsgrad is not supported"));
    }
  } else if (lower == "rmsprop") {
    o.set_kind(proto::OptimizerConfig::RMSPROP);
    o.set_rho(Number(config, "rho", 0.9));
    o.set_momentum(Number(config, "momentum", 0));
    o.set_epsilon(Number(config, "epsilon", 1e-7));
    o.set_centered(flag("centered"));
    if (!(o.rho() > 0)) {  // 0 would read as "the default" below
      return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: RMSprop's rho ",
                                                     o.rho(), " is not supported (in (0, 1))"));
    }
  } else if (lower == "adagrad") {
    o.set_kind(proto::OptimizerConfig::ADAGRAD);
    o.set_initial_accumulator_value(Number(config, "initial_accumulator_value", 0.1));
    o.set_epsilon(Number(config, "epsilon", 1e-7));
    if (!(o.initial_accumulator_value() > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: Adagrad's initial_accumulator_value ",
                       o.initial_accumulator_value(), " is not supported (> 0)"));
    }
  } else if (lower == "ftrl") {
    o.set_kind(proto::OptimizerConfig::FTRL);
    o.set_learning_rate_power(Number(config, "learning_rate_power", -0.5));
    o.set_initial_accumulator_value(Number(config, "initial_accumulator_value", 0.1));
    o.set_l1_regularization_strength(Number(config, "l1_regularization_strength", 0));
    o.set_l2_regularization_strength(Number(config, "l2_regularization_strength", 0));
    o.set_l2_shrinkage_regularization_strength(
        Number(config, "l2_shrinkage_regularization_strength", 0));
    o.set_beta(Number(config, "beta", 0));
    if (!(o.initial_accumulator_value() > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": compile_config: Ftrl's initial_accumulator_value ",
                       o.initial_accumulator_value(), " is not supported (> 0)"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": compile_config: optimizer ", name,
        " is not supported (supported: SGD with momentum and nesterov, Adam, AdamW, RMSprop, "
        "Adagrad, Ftrl); give --optimizer"));
  }
  absl::StatusOr<proto::OptimizerConfig> complete = optimizer::CompleteOptimizerConfig(o);
  if (!complete.ok()) {
    // The user's model file asks for what cannot run: bad input (exit 2).
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: ", complete.status().message()));
  }
  return complete;
}

}  // namespace

absl::StatusOr<CompileConfig> ReadCompileConfig(absl::string_view config_json,
                                                const compute::Model& model,
                                                absl::string_view what) {
  CompileConfig out;
  const Json top = Json::parse(config_json.begin(), config_json.end(), nullptr, false);
  if (top.is_discarded()) return out;  // the model reader reports it
  const Json* compile = Find(top, "compile_config");
  if (compile == nullptr) return out;
  // Keras 3.15's Model.compile arguments. run_eagerly, steps_per_execution,
  // jit_compile choose how Keras executes a step, not what it computes;
  // auto_scale_loss (Keras never saves it) is --loss_scale's.
  PSC_RETURN_IF_ERROR(
      OnlyKnownKeys(compile,
                    {"optimizer", "loss", "loss_weights", "metrics", "weighted_metrics",
                     "run_eagerly", "steps_per_execution", "jit_compile", "auto_scale_loss"},
                    what, "compile()"));
  if (Find(*compile, "loss_weights") != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": compile_config: loss_weights is not supported (pscluster trains one output "
                     "with one loss)"));
  }
  {
    // The metrics depend on the labels' form, which the loss says.
    LabelForm form = LabelForm::kClassIds;
    if (const Json* l = Find(*compile, "loss"); l != nullptr) {
      std::string n;
      const Json* c = nullptr;
      ClassAndConfig(*l, &n, &c);
      if (n == "CategoricalCrossentropy" || n == "categorical_crossentropy") {
        form = LabelForm::kOneHot;
      } else if (n == "BinaryCrossentropy" || n == "binary_crossentropy") {
        form = LabelForm::kBinary;
      } else if (!RegressionLossName(n).empty()) {
        form = LabelForm::kTargets;
      }
    }
    PSC_ASSIGN_OR_RETURN(out.metrics,
                         ReadMetrics(Find(*compile, "metrics"), what, "metrics", form));
    PSC_RETURN_IF_ERROR(
        ReadMetrics(Find(*compile, "weighted_metrics"), what, "weighted_metrics", form).status());
  }
  if (const Json* o = Find(*compile, "optimizer"); o != nullptr) {
    PSC_ASSIGN_OR_RETURN(const Json* inner, UnwrapLossScale(*o, what, &out.loss_scale));
    PSC_ASSIGN_OR_RETURN(out.optimizer, Optimizer(*inner, what));
  }
  const Json* loss = Find(*compile, "loss");
  if (loss == nullptr) return out;
  std::string name;
  const Json* config = nullptr;
  ClassAndConfig(*loss, &name, &config);
  if (name == "SparseCategoricalCrossentropy" || name == "sparse_categorical_crossentropy") {
    out.loss = "sparse_categorical_crossentropy";
  } else if (name == "CategoricalCrossentropy" || name == "categorical_crossentropy") {
    out.loss = "categorical_crossentropy";
  } else if (name == "BinaryCrossentropy" || name == "binary_crossentropy") {
    out.loss = "binary_crossentropy";
  } else if (!RegressionLossName(name).empty()) {
    out.loss = RegressionLossName(name);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: loss ", name.empty() ? loss->dump() : name,
                     " is not supported (supported: sparse_categorical_crossentropy, "
                     "categorical_crossentropy, binary_crossentropy, mean_squared_error, "
                     "mean_absolute_error, huber)"));
  }
  if (loss->is_array() || (loss->is_object() && Find(*loss, "class_name") == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": compile_config: a loss per output is not supported (one output, one loss)"));
  }
  const bool regression = out.loss != "sparse_categorical_crossentropy" &&
                          out.loss != "categorical_crossentropy" &&
                          out.loss != "binary_crossentropy";
  if (regression) {
    // Keras 3's MeanSquaredError, MeanAbsoluteError and Huber configs, and
    // Keras 2's delta (Keras 3.15's Huber.get_config drops it: its delta
    // then loads as 1, here as in keras.models.load_model).
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(config, {"name", "reduction", "dtype", "delta"}, what,
                                      absl::StrCat("the loss ", name)));
    if (const Json* d = config == nullptr ? nullptr : Find(*config, "delta"); d != nullptr) {
      if (out.loss != "huber" || !d->is_number() || !(d->get<double>() > 0) ||
          d->get<double>() > 3.4e38) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": compile_config: the loss ", name, "'s delta ", d->dump(),
            out.loss == "huber" ? " is not a number > 0" : " is not one of its arguments"));
      }
      out.huber_delta = static_cast<float>(d->get<double>());
    }
  } else {
    PSC_RETURN_IF_ERROR(OnlyKnownKeys(
        config,
        {"name", "reduction", "from_logits", "ignore_class", "label_smoothing", "axis", "dtype"},
        what, absl::StrCat("the loss ", name)));
  }
  if (config != nullptr && Find(*config, "ignore_class") != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compile_config: the loss's ignore_class is not supported"));
  }
  // reduction=None (per-example losses) is written as null: refused too.
  if (const Json* r = config == nullptr ? nullptr : FindEvenNull(*config, "reduction");
      r != nullptr) {
    const std::string reduction = r->is_string() ? r->get<std::string>() : r->dump();
    // "mean" is sum_over_batch_size's other name; "auto" is tf.keras 2's.
    if (reduction == "sum") {
      out.reduction_sum = true;
    } else if (reduction != "sum_over_batch_size" && reduction != "mean" && reduction != "auto") {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: the loss's reduction ", r->dump(),
          " is not supported (supported: \"sum_over_batch_size\", Keras's default, and "
          "\"sum\")"));
    }
  }
  if (const Json* s = config == nullptr ? nullptr : Find(*config, "label_smoothing");
      s != nullptr && !(s->is_number() && s->get<double>() == 0)) {
    const double smoothing = s->is_number() ? s->get<double>() : -1;
    if (out.loss == "sparse_categorical_crossentropy") {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compile_config: the loss ", name,
          " has no label_smoothing (Keras's CategoricalCrossentropy and BinaryCrossentropy "
          "have)"));
    }
    if (!(smoothing >= 0 && smoothing <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(what,
                                                     ": compile_config: the loss's "
                                                     "label_smoothing ",
                                                     s->dump(), " is not a number in [0, 1]"));
    }
    out.label_smoothing = static_cast<float>(smoothing);
  }
  if (const Json* axis = config == nullptr ? nullptr : Find(*config, "axis");
      axis != nullptr && !(axis->is_number_integer() && axis->get<int64_t>() == -1)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: the loss's axis ",
                                                   axis->dump(), " is not supported (-1)"));
  }
  if (const Json* d = config == nullptr ? nullptr : Find(*config, "dtype");
      d != nullptr && !(d->is_string() && d->get<std::string>() == "float32")) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": compile_config: the loss's dtype ",
                                                   d->dump(), " is not supported (float32)"));
  }
  if (regression) return out;  // any output; CheckLossFitsModel refuses a softmax
  const bool from_logits = config != nullptr && Find(*config, "from_logits") != nullptr &&
                           Find(*config, "from_logits")->is_boolean() &&
                           Find(*config, "from_logits")->get<bool>();
  // The model's output must be what from_logits says: logits (a Dense
  // without activation) or probabilities (a softmax; a sigmoid for the
  // binary loss). Other outputs are CheckLossFitsModel's (job_loss.h).
  const std::string act = model.output_activation();
  const bool probabilities =
      out.loss == "binary_crossentropy" ? act == "sigmoid" : act == "softmax";
  if ((act == "linear" || probabilities) && from_logits == probabilities) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": compile_config: the loss has from_logits=", from_logits ? "True" : "False",
        " but the model outputs ", act == "linear" ? "logits" : absl::StrCat("a ", act),
        ": Keras would train another loss than the cross-entropy of the model's outputs"));
  }
  return out;
}

namespace {

// The optimizer's schedule as Keras 3 serializes one.
Json ScheduleJson(const proto::OptimizerConfig& optimizer) {
  using S = proto::LearningRateSchedule;
  const S& s = optimizer.schedule();
  Json config;
  std::string cls;
  switch (s.kind()) {
    case S::EXPONENTIAL_DECAY:
      cls = "ExponentialDecay";
      config = {{"initial_learning_rate", optimizer.learning_rate()},
                {"decay_steps", s.decay_steps()},
                {"decay_rate", s.decay_rate()},
                {"staircase", s.staircase()},
                {"name", cls}};
      break;
    case S::PIECEWISE_CONSTANT_DECAY:
      cls = "PiecewiseConstantDecay";
      config = {
          {"boundaries", Json(std::vector<double>(s.boundaries().begin(), s.boundaries().end()))},
          {"values", Json(std::vector<double>(s.values().begin(), s.values().end()))},
          {"name", cls}};
      break;
    default:
      cls = "CosineDecay";
      config = {{"initial_learning_rate", optimizer.learning_rate()},
                {"decay_steps", s.decay_steps()},
                {"alpha", s.alpha()},
                {"name", cls},
                {"warmup_target", s.has_warmup_target() ? Json(s.warmup_target()) : Json()},
                {"warmup_steps", s.warmup_steps()}};
      break;
  }
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", cls},
          {"config", config},
          {"registered_name", nullptr}};
}

}  // namespace

std::string WithCompileConfig(const std::string& config_json,
                              const proto::OptimizerConfig& optimizer, bool output_softmax) {
  Json top = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!top.is_object()) return config_json;
  Json compile = top.contains("compile_config") && top["compile_config"].is_object()
                     ? top["compile_config"]
                     : Json::object();
  Json o = {
      {"name", "sgd"},
      {"learning_rate", optimizer.learning_rate()},
      {"weight_decay", optimizer.has_weight_decay() ? Json(optimizer.weight_decay()) : Json()},
      {"clipnorm", optimizer.clipnorm() > 0 ? Json(optimizer.clipnorm()) : Json()},
      {"global_clipnorm",
       optimizer.global_clipnorm() > 0 ? Json(optimizer.global_clipnorm()) : Json()},
      {"clipvalue", optimizer.clipvalue() > 0 ? Json(optimizer.clipvalue()) : Json()},
      {"use_ema", false},
      {"ema_momentum", 0.99},
      {"ema_overwrite_frequency", nullptr},
      {"loss_scale_factor", nullptr},
      {"gradient_accumulation_steps", nullptr}};
  std::string cls = "SGD";
  switch (optimizer.kind()) {
    case proto::OptimizerConfig::ADAM:
    case proto::OptimizerConfig::ADAMW:
      cls = optimizer.kind() == proto::OptimizerConfig::ADAM ? "Adam" : "AdamW";
      o["name"] = optimizer.kind() == proto::OptimizerConfig::ADAM ? "adam" : "adamw";
      o["beta_1"] = optimizer.beta_1();
      o["beta_2"] = optimizer.beta_2();
      o["epsilon"] = optimizer.epsilon();
      o["amsgrad"] = false;
      break;
    case proto::OptimizerConfig::RMSPROP:
      cls = "RMSprop";
      o["name"] = "rmsprop";
      o["rho"] = optimizer.rho();
      o["momentum"] = optimizer.momentum();
      o["epsilon"] = optimizer.epsilon();
      o["centered"] = optimizer.centered();
      break;
    case proto::OptimizerConfig::ADAGRAD:
      cls = "Adagrad";
      o["name"] = "adagrad";
      o["initial_accumulator_value"] = optimizer.initial_accumulator_value();
      o["epsilon"] = optimizer.epsilon();
      break;
    case proto::OptimizerConfig::FTRL:
      cls = "Ftrl";
      o["name"] = "ftrl";
      o["learning_rate_power"] = optimizer.learning_rate_power();
      o["initial_accumulator_value"] = optimizer.initial_accumulator_value();
      o["l1_regularization_strength"] = optimizer.l1_regularization_strength();
      o["l2_regularization_strength"] = optimizer.l2_regularization_strength();
      o["l2_shrinkage_regularization_strength"] = optimizer.l2_shrinkage_regularization_strength();
      o["beta"] = optimizer.beta();
      break;
    case proto::OptimizerConfig::MOMENTUM:
      o["momentum"] = optimizer.momentum();
      o["nesterov"] = optimizer.nesterov();
      break;
    default:
      o["momentum"] = 0.0;
      o["nesterov"] = false;
      break;
  }
  if (optimizer.schedule().kind() != proto::LearningRateSchedule::CONSTANT) {
    o["learning_rate"] = ScheduleJson(optimizer);
  }
  compile["optimizer"] = {{"module", "keras.optimizers"},
                          {"class_name", cls},
                          {"config", o},
                          {"registered_name", nullptr}};
  if (!compile.contains("loss") || compile["loss"].is_null()) {
    compile["loss"] = {{"module", "keras.losses"},
                       {"class_name", "SparseCategoricalCrossentropy"},
                       {"config",
                        {{"name", "sparse_categorical_crossentropy"},
                         {"reduction", "sum_over_batch_size"},
                         {"from_logits", !output_softmax},
                         {"ignore_class", nullptr}}},
                       {"registered_name", nullptr}};
  }
  if (!compile.contains("metrics") || compile["metrics"].is_null()) {
    compile["metrics"] = Json::array({"accuracy"});
  }
  top["compile_config"] = compile;
  return top.dump();
}

}  // namespace job
}  // namespace psc
