#include "ps_server/variable_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/checked_size.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/optimizer/optimizer.h"
#include "common/tensor/initializer_spec.h"
#include "common/tensor/row_sparse.h"
#include "common/tensor/tensor.h"
#include "common/tensor/topk.h"
#include "common/tensor/wire_dtype.h"
#include "ps_server/row_gradient.h"

namespace psc {
namespace ps_server {
namespace {

constexpr int kMaxNameLength = 512;

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty variable name");
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable name longer than ", kMaxNameLength, " characters"));
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat("variable name \"", name, "\" has a space or control character"));
    }
  }
  return absl::OkStatus();
}

// What every variable that enters a shard passes, whether CreateVariables or
// a checkpoint brings it: a valid name, and a finite float32 tensor whose
// size is overflow-checked (base::ByteSize, through ValidateFloatTensor).
absl::Status ValidateVariable(const std::string& name, const proto::Tensor& value,
                              absl::string_view what) {
  PSC_RETURN_IF_ERROR(CheckName(name));
  PSC_RETURN_IF_ERROR(tensor::ValidateFloatTensor(value, what));
  if (int64_t bad = tensor::FirstNonFinite(value.data()); bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": non-finite value at element ", bad));
  }
  return absl::OkStatus();
}

// A variable its server makes (CreateVariablesRequest.generated): a valid
// name, rows of a table that exist, at most kMaxTensorBytes of them, and a
// known initializer with finite bounds.
absl::Status ValidateGenerated(const proto::GeneratedVariable& g, tensor::Initializer* init) {
  PSC_RETURN_IF_ERROR(CheckName(g.name()));
  const std::string what = absl::StrCat("variable \"", g.name(), "\"");
  if (g.shape_size() < 1 || g.shape_size() != g.variable_shape_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a made variable needs rows of a table of the same rank"));
  }
  constexpr int64_t kMaxElements = static_cast<int64_t>(base::kMaxTensorBytes / sizeof(float));
  PSC_RETURN_IF_ERROR(base::ElementCount(g.shape(), kMaxElements, what).status());
  PSC_RETURN_IF_ERROR(base::ElementCount(g.variable_shape(), INT64_MAX / 2, what).status());
  for (int d = 0; d < g.shape_size(); ++d) {
    if (g.shape(d) < 1 || g.variable_shape(d) < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": rows of shape ", tensor::ShapeString(g.shape()), " of a table ",
                       tensor::ShapeString(g.variable_shape()), ": every dimension must be >= 1"));
    }
  }
  for (int d = 1; d < g.shape_size(); ++d) {
    if (g.shape(d) != g.variable_shape(d)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": rows of shape ", tensor::ShapeString(g.shape()),
          " are not rows of a table of shape ", tensor::ShapeString(g.variable_shape())));
    }
  }
  if (g.first_row() < 0 || g.first_row() > g.variable_shape(0) - g.shape(0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": rows [", g.first_row(), ", +",
                                                   g.shape(0), ") are not in a table of ",
                                                   g.variable_shape(0), " rows"));
  }
  if (g.index() < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": negative index"));
  return base::Prefix(tensor::FromProto(g.initializer(), init), what);
}

template <typename Shape>
bool SameShape(const std::vector<int64_t>& a, const Shape& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

std::string RuleString(std::optional<float> moving_average) {
  return moving_average ? absl::StrCat("a moving average of momentum ", *moving_average)
                        : std::string("trainable");
}

}  // namespace

VariableStore::Variable::Variable(std::string n, std::vector<int64_t> s, int64_t size,
                                  const std::vector<float>& slot_initial_values,
                                  std::optional<float> moving_average)
    : name(std::move(n)), shape(std::move(s)), size(size), moving_average(moving_average) {
  absl::MutexLock lock(&mu);
  values.assign(size, 0.0f);
  for (float initial : slot_initial_values) slots.emplace_back(size, initial);
}

void VariableStore::set_optimizer(const proto::OptimizerConfig& config) {
  optimizer_ = std::make_unique<optimizer::Optimizer>(config);
}

int VariableStore::num_slots() const {
  return optimizer_ == nullptr ? 0 : static_cast<int>(optimizer_->slot_names().size());
}

int64_t VariableStore::num_elements() const {
  int64_t n = 0;
  for (const auto& v : variables_) n += v->size;
  return n;
}

absl::Status VariableStore::Create(const Tensors& variables, const MovingAverages& moving_averages,
                                   const Generated& generated, int* created, int* existing) {
  // Validate everything first, then build the new variables aside (where an
  // allocation may fail), then commit: all or nothing.
  struct Entry {
    const std::string* name;
    std::vector<int64_t> shape;
    const proto::Tensor* values = nullptr;           // given
    const proto::GeneratedVariable* rows = nullptr;  // or made here
    tensor::Initializer init;
  };
  std::vector<Entry> entries;
  for (const proto::NamedTensor& v : variables) {
    PSC_RETURN_IF_ERROR(
        ValidateVariable(v.name(), v.tensor(), absl::StrCat("variable \"", v.name(), "\"")));
    entries.push_back(
        {&v.name(), {v.tensor().shape().begin(), v.tensor().shape().end()}, &v.tensor()});
  }
  for (const proto::GeneratedVariable& g : generated) {
    Entry e{&g.name(), {g.shape().begin(), g.shape().end()}, nullptr, &g};
    PSC_RETURN_IF_ERROR(ValidateGenerated(g, &e.init));
    entries.push_back(std::move(e));
  }
  absl::flat_hash_set<absl::string_view> requested;
  for (const Entry& e : entries) requested.insert(*e.name);
  absl::flat_hash_map<std::string, float> rules;  // the moving averages
  for (const proto::MovingAverage& ma : moving_averages) {
    const std::string what = absl::StrCat("moving average \"", ma.variable(), "\"");
    PSC_RETURN_IF_ERROR(optimizer::CheckMovingAverageMomentum(ma.momentum(), ma.variable()));
    if (!requested.contains(ma.variable())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": no variable of that name in this request"));
    }
    if (!rules.emplace(ma.variable(), ma.momentum()).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " given twice"));
    }
  }
  for (const proto::GeneratedVariable& g : generated) {
    if (rules.contains(g.name())) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", g.name(),
                                                     "\" is made by its server: it is an "
                                                     "embedding table, not a moving average"));
    }
  }
  auto rule = [&rules](const std::string& name) -> std::optional<float> {
    auto it = rules.find(name);
    if (it == rules.end()) return std::nullopt;
    return it->second;
  };
  absl::flat_hash_set<std::string> names;
  int new_count = 0, old_count = 0;
  for (const Entry& e : entries) {
    const std::string what = absl::StrCat("variable \"", *e.name, "\"");
    if (!names.insert(*e.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " given twice"));
    }
    auto it = index_.find(*e.name);
    if (it == index_.end()) {
      ++new_count;
      continue;
    }
    const Variable& old = *variables_[it->second];
    if (!SameShape(old.shape, e.shape)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " exists with shape ", tensor::ShapeString(old.shape),
                       "; cannot create it with shape ", tensor::ShapeString(e.shape)));
    }
    if (old.moving_average != rule(*e.name)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " exists as ", RuleString(old.moving_average),
                       "; cannot create it as ", RuleString(rule(*e.name))));
    }
    ++old_count;
  }
  std::vector<std::unique_ptr<Variable>> fresh;
  fresh.reserve(new_count);
  for (Entry& e : entries) {
    if (index_.contains(*e.name)) continue;
    const int64_t n = tensor::NumElements(e.shape);
    auto var = std::make_unique<Variable>(
        *e.name, e.shape, n,
        optimizer_ == nullptr ? std::vector<float>() : optimizer_->slot_initial_values(),
        rule(*e.name));
    {
      absl::MutexLock lock(&var->mu);
      if (e.rows != nullptr) {
        tensor::InitializeRows(e.init, e.rows->variable_shape(), e.rows->seed(), e.rows->index(),
                               e.rows->first_row(), absl::MakeSpan(var->values));
        // The bounds were checked; the values are held to what a given
        // variable is (ValidateVariable) all the same, before any commit.
        for (size_t i = 0; i < var->values.size(); ++i) {
          if (!std::isfinite(var->values[i])) {
            return absl::InvalidArgumentError(absl::StrCat(
                "variable \"", *e.name, "\": its initializer made a non-finite value at ", i));
          }
        }
      } else if (n > 0) {
        // (An empty tensor's vector has no storage: memcpy of nothing to a
        // null pointer is still undefined, as shard_request_fuzz found.)
        std::memcpy(var->values.data(), e.values->data().data(), n * sizeof(float));
      }
    }
    fresh.push_back(std::move(var));
  }
  variables_.reserve(variables_.size() + fresh.size());
  index_.reserve(variables_.size() + fresh.size());
  for (auto& var : fresh) {
    index_[var->name] = static_cast<int>(variables_.size());
    variables_.push_back(std::move(var));
  }
  *created = new_count;
  *existing = old_count;
  return absl::OkStatus();
}

absl::StatusOr<int> VariableStore::Lookup(const proto::NamedTensor& g, int shard,
                                          std::vector<bool>* seen) const {
  auto it = index_.find(g.name());
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrCat("gradient for \"", g.name(), "\": no such variable on shard ", shard));
  }
  if ((*seen)[it->second]) {
    return absl::InvalidArgumentError(absl::StrCat("two gradients for \"", g.name(), "\""));
  }
  if (variables_[it->second]->frozen()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient for \"", g.name(),
        "\": the variable is frozen (trainable=False, or a moving average of momentum 1) and "
        "takes none (the worker runs another job's model: a job fingerprint mismatch)"));
  }
  (*seen)[it->second] = true;
  return it->second;
}

absl::Status VariableStore::CheckShape(int i, const proto::NamedTensor& g) const {
  const Variable& v = *variables_[i];
  if (!SameShape(v.shape, g.tensor().shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient for \"", g.name(), "\" has shape ", tensor::ShapeString(g.tensor().shape()),
        "; the variable has ", tensor::ShapeString(v.shape)));
  }
  return absl::OkStatus();
}

absl::StatusOr<GradientRules> GradientRules::FromConfig(const proto::ConfigureRequest& config) {
  GradientRules rules;
  rules.wire = tensor::WireDtypeOrFloat32(config.policy().wire_dtype());
  rules.topk_ratio = config.policy().topk_ratio();
  for (const proto::GradientDeclaration& d : config.gradients()) {
    const std::string what = absl::StrCat("gradient declaration of \"", d.variable(), "\"");
    if (d.variable().empty()) {
      return absl::InvalidArgumentError("a gradient declaration without a variable name");
    }
    switch (d.encoding()) {
      case proto::GRADIENT_DENSE:
        break;
      case proto::GRADIENT_TOP_K:
        if (rules.topk_ratio <= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": top-k, and the policy has no topk_ratio"));
        }
        break;
      case proto::GRADIENT_ROW_SPARSE:
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": unknown encoding ", static_cast<int>(d.encoding())));
    }
    if (!rules.declared.emplace(d.variable(), d.encoding()).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " given twice"));
    }
    if (d.pull_float32()) rules.float32_pulls.insert(d.variable());
  }
  return rules;
}

bool VariableStore::row_sparse(int i) const {
  const Variable& v = *variables_[i];
  return !v.moving_average.has_value() && rules_.Of(v.name) == proto::GRADIENT_ROW_SPARSE;
}

bool VariableStore::RowsAreTheUpdate(int64_t iteration) const {
  const proto::OptimizerConfig& c = optimizer_->config();
  if ((c.has_weight_decay() && c.weight_decay() > 0) || c.clipnorm() > 0) return false;
  switch (c.kind()) {
    case proto::OptimizerConfig::SGD:
    case proto::OptimizerConfig::ADAGRAD:
      return true;
    case proto::OptimizerConfig::ADAM:
      // Lazy Adam: the rows pushed alone, by the dense formula (the bias
      // correction at the update count).
      return c.lazy_rows();
    case proto::OptimizerConfig::FTRL:
      // Every update sets each weight from its linear term and accumulator:
      // the first one sets the rows no gradient touched too (to 0, their
      // linear term's), and a zero gradient still moves a weight under
      // shrinkage or when the rate changes. Otherwise it leaves them.
      return iteration > 0 && c.l2_shrinkage_regularization_strength() == 0 &&
             c.schedule().kind() == proto::LearningRateSchedule::CONSTANT;
    default:
      return false;
  }
}

absl::Status VariableStore::Match(const Tensors& gradients, int shard,
                                  std::vector<absl::string_view>* matched,
                                  std::vector<std::vector<float>>* decoded) const {
  const GradientRules& rules = rules_;
  const proto::DataType wire = rules.wire;
  matched->assign(variables_.size(), absl::string_view());
  decoded->clear();
  decoded->reserve(variables_.size());  // views into it stay valid
  std::vector<bool> seen(variables_.size(), false);
  for (const proto::NamedTensor& g : gradients) {
    PSC_ASSIGN_OR_RETURN(const int i, Lookup(g, shard, &seen));
    const std::string what = absl::StrCat("gradient for \"", g.name(), "\"");
    if (g.tensor().dtype() != wire) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " arrives as ", tensor::WireDtypeName(g.tensor().dtype()),
                       "; this job's --wire_dtype is ", tensor::WireDtypeName(wire),
                       " (the worker runs another job's settings: a job fingerprint mismatch)"));
    }
    const Variable& v = *variables_[i];
    if (row_sparse(i)) {
      PSC_ASSIGN_OR_RETURN(tensor::RowSparse rows,
                           tensor::DecodeRowSparse(g.tensor(), wire, v.shape, what));
      (*matched)[i] = PackRows(rows, &decoded->emplace_back());
      continue;
    }
    if (g.tensor().row_sparse()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " arrives row-sparse; its variable is declared ",
                       v.moving_average.has_value() ? "a moving average (dense)" : "dense",
                       " (the worker runs another job's settings: a job fingerprint mismatch)"));
    }
    const bool sparse = rules.Of(v.name) == proto::GRADIENT_TOP_K && !v.moving_average.has_value();
    if (!sparse && !g.tensor().indices().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " arrives sparse; ",
                       v.moving_average.has_value() ? "a moving average's statistic travels dense"
                                                    : "its variable is declared dense",
                       " (the worker runs another job's settings: a job fingerprint mismatch)"));
    }
    if (sparse) {
      PSC_RETURN_IF_ERROR(CheckShape(i, g));
      std::vector<float>& values = decoded->emplace_back(v.size);
      PSC_RETURN_IF_ERROR(tensor::DecodeSparse(g.tensor(), wire,
                                               tensor::TopKCount(v.size, rules.topk_ratio), what,
                                               absl::MakeSpan(values)));
      (*matched)[i] = absl::string_view(reinterpret_cast<const char*>(values.data()),
                                        values.size() * sizeof(float));
      continue;
    }
    if (wire == proto::DT_FLOAT32) {
      PSC_RETURN_IF_ERROR(tensor::ValidateFloatTensor(g.tensor(), what));
      PSC_RETURN_IF_ERROR(CheckShape(i, g));
      (*matched)[i] = g.tensor().data();
      continue;
    }
    PSC_RETURN_IF_ERROR(CheckShape(i, g));  // the variable's: its size is known to fit
    std::vector<float>& values = decoded->emplace_back(variables_[i]->size);
    if (absl::Status s = tensor::DecodeFloats(g.tensor().data(), wire, absl::MakeSpan(values));
        !s.ok()) {
      return base::Prefix(s, what);
    }
    (*matched)[i] = absl::string_view(reinterpret_cast<const char*>(values.data()),
                                      values.size() * sizeof(float));
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i] && !variables_[i]->frozen()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push lacks a gradient for \"", variables_[i]->name,
          "\": every push carries one gradient for each variable of the shard but the frozen"));
    }
  }
  return absl::OkStatus();
}

absl::Status VariableStore::CheckShapes(const Tensors& gradients, int shard) const {
  std::vector<bool> seen(variables_.size(), false);
  for (const proto::NamedTensor& g : gradients) {
    PSC_ASSIGN_OR_RETURN(const int i, Lookup(g, shard, &seen));
    PSC_RETURN_IF_ERROR(CheckShape(i, g));
  }
  return absl::OkStatus();
}

absl::Status VariableStore::CheckFinite(const std::vector<absl::string_view>& matched) const {
  for (size_t i = 0; i < matched.size(); ++i) {
    if (!matched[i].empty() && row_sparse(static_cast<int>(i))) {
      const RowsView rows(matched[i]);
      const int64_t width = tensor::RowWidth(variables_[i]->shape);
      const absl::string_view values(reinterpret_cast<const char*>(rows.row(0, width)),
                                     rows.size() * width * sizeof(float));
      if (int64_t bad = tensor::FirstNonFinite(values); bad >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "gradient for \"", variables_[i]->name, "\" has a non-finite value in row ",
            rows.id(bad / width), ", element ", bad % width));
      }
      continue;
    }
    if (int64_t bad = tensor::FirstNonFinite(matched[i]); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("gradient for \"", variables_[i]->name,
                                                     "\" has a non-finite value at element ", bad));
    }
  }
  return absl::OkStatus();
}

void VariableStore::ApplyOne(Variable& v, const float* grad, std::vector<float*>* slots,
                             int64_t iteration) {
  if (v.moving_average) {
    optimizer::ApplyMovingAverage(v.values.data(), grad, static_cast<size_t>(v.size),
                                  *v.moving_average);
    return;
  }
  slots->clear();
  for (auto& s : v.slots) slots->push_back(s.data());
  optimizer_->Apply(v.values.data(), grad, static_cast<size_t>(v.size), slots->data(), iteration);
}

void VariableStore::ApplyRows(Variable& v, int64_t n, const std::function<int64_t(int64_t)>& ids,
                              const std::function<const float*(int64_t)>& row, int64_t iteration) {
  const int64_t width = tensor::RowWidth(v.shape);
  if (RowsAreTheUpdate(iteration)) {
    std::vector<float*> slots(v.slots.size());
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = ids(j) * width;
      for (size_t s = 0; s < slots.size(); ++s) slots[s] = v.slots[s].data() + at;
      optimizer_->Apply(v.values.data() + at, row(j), static_cast<size_t>(width), slots.data(),
                        iteration);
    }
    return;
  }
  // Keras's update of the dense gradient (zeros elsewhere), over the whole
  // variable: momentum, Adam, RMSprop and weight decay move every row.
  std::vector<float> dense(static_cast<size_t>(v.size), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(dense.data() + ids(j) * width, row(j), static_cast<size_t>(width) * sizeof(float));
  }
  std::vector<float*> slots;
  ApplyOne(v, dense.data(), &slots, iteration);
}

void VariableStore::Apply(const std::vector<absl::string_view>& matched, int64_t iteration) {
  std::vector<float*> slots;
  for (size_t i = 0; i < variables_.size(); ++i) {
    Variable& v = *variables_[i];
    if (v.frozen()) continue;  // no gradient came
    if (row_sparse(static_cast<int>(i))) {
      const RowsView rows(matched[i]);
      const int64_t width = tensor::RowWidth(v.shape);
      absl::MutexLock lock(&v.mu);
      ApplyRows(
          v, rows.size(), [&](int64_t j) { return rows.id(j); },
          [&](int64_t j) { return rows.row(j, width); }, iteration);
      continue;
    }
    tensor::FloatView grad(matched[i]);
    absl::MutexLock lock(&v.mu);
    ApplyOne(v, grad.data(), &slots, iteration);
  }
}

void VariableStore::ApplyStep(const SyncAccumulator::Step& step, int64_t iteration) {
  std::vector<float> mean;
  std::vector<float*> slots;
  for (size_t i = 0; i < variables_.size(); ++i) {
    Variable& v = *variables_[i];
    if (v.frozen()) continue;  // no gradient came
    if (row_sparse(static_cast<int>(i))) {
      const int64_t width = tensor::RowWidth(v.shape);
      const tensor::RowSparse rows = step.MeanRows(i, width);
      absl::MutexLock lock(&v.mu);
      ApplyRows(
          v, static_cast<int64_t>(rows.ids.size()), [&](int64_t j) { return rows.ids[j]; },
          [&](int64_t j) { return rows.values.data() + j * width; }, iteration);
      continue;
    }
    mean.resize(v.size);
    step.Mean(i, v.size, mean.data());
    absl::MutexLock lock(&v.mu);
    ApplyOne(v, mean.data(), &slots, iteration);
  }
}

absl::Status VariableStore::CheckNames(const Names& names, int shard) const {
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& name : names) {
    if (!index_.contains(name)) {
      return absl::NotFoundError(absl::StrCat("no variable \"", name, "\" on shard ", shard));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", name, "\" requested twice"));
    }
  }
  return absl::OkStatus();
}

int64_t VariableStore::Read(const Names& names, proto::DataType wire, bool skip_frozen,
                            bool skip_row_sparse, Tensors* out) const {
  int64_t bytes = 0;
  auto add = [&](const Variable& v) {
    if (skip_frozen && v.frozen()) return;
    if (skip_row_sparse && !v.moving_average.has_value() &&
        rules_.Of(v.name) == proto::GRADIENT_ROW_SPARSE) {
      return;
    }
    proto::NamedTensor* t = out->Add();
    t->set_name(v.name);
    absl::MutexLock lock(&v.mu);
    // Only float16 can refuse (a value beyond its range): that variable
    // then travels exactly, as float32, which every reader takes.
    const proto::DataType dtype = rules_.PullDtype(v.name, wire);
    if (dtype == proto::DT_FLOAT32 ||
        !tensor::SetWireTensor(v.shape, v.values, dtype, t->mutable_tensor()).ok()) {
      tensor::SetFloatTensor(v.shape, v.values, t->mutable_tensor());
    }
    bytes += static_cast<int64_t>(t->tensor().data().size());
  };
  if (names.empty()) {
    for (const auto& v : variables_) add(*v);
  } else {
    for (const std::string& name : names) add(*variables_[index_.at(name)]);
  }
  return bytes;
}

absl::StatusOr<int64_t> VariableStore::ReadRows(
    const google::protobuf::RepeatedPtrField<proto::RowSelection>& rows, const Names& names,
    int shard, proto::DataType wire, Tensors* out) const {
  absl::flat_hash_set<absl::string_view> asked(names.begin(), names.end());
  struct Wanted {
    const Variable* variable;
    int slot;
    std::vector<int64_t> ids;
  };
  std::vector<Wanted> wanted;
  for (const proto::RowSelection& r : rows) {
    const std::string what = absl::StrCat("rows of \"", r.variable(), "\"");
    auto it = index_.find(r.variable());
    if (it == index_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no variable \"", r.variable(), "\" on shard ", shard));
    }
    if (!asked.insert(r.variable()).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the variable is asked for twice"));
    }
    const Variable& v = *variables_[it->second];
    if (tensor::RowWidth(v.shape) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a variable without rows"));
    }
    size_t slots = 0;
    {
      absl::MutexLock lock(&v.mu);
      slots = v.slots.size();  // fixed when the variable is made
    }
    if (r.slot() < 0 || static_cast<size_t>(r.slot()) > slots) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": slot ", r.slot(), " asked; it has ", slots, " optimizer slot(s)"));
    }
    PSC_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                         tensor::DecodeRowIds(r.row_ids(), v.shape[0], what));
    wanted.push_back({&v, r.slot(), std::move(ids)});
  }
  int64_t bytes = 0;
  std::vector<float> values;
  for (const auto& [v, slot, ids] : wanted) {
    const int64_t width = tensor::RowWidth(v->shape);
    values.resize(ids.size() * static_cast<size_t>(width));
    {
      absl::MutexLock lock(&v->mu);
      const std::vector<float>& from = slot == 0 ? v->values : v->slots[slot - 1];
      for (size_t j = 0; j < ids.size(); ++j) {
        std::memcpy(values.data() + j * width, from.data() + ids[j] * width,
                    static_cast<size_t>(width) * sizeof(float));
      }
    }
    proto::NamedTensor* t = out->Add();
    t->set_name(v->name);
    // As Read: a row float16 cannot hold travels as float32; slots always.
    const proto::DataType dtype = rules_.PullDtype(v->name, wire);
    if (dtype == proto::DT_FLOAT32 || slot != 0 ||
        !tensor::SetRowSparseTensor(v->shape, ids, values, dtype, t->mutable_tensor()).ok()) {
      PSC_RETURN_IF_ERROR(tensor::SetRowSparseTensor(v->shape, ids, values, proto::DT_FLOAT32,
                                                     t->mutable_tensor()));
    }
    bytes += static_cast<int64_t>(t->tensor().data().size() + t->tensor().row_ids().size());
  }
  return bytes;
}

void VariableStore::Save(proto::ShardCheckpoint* checkpoint, bool skip_row_sparse) const {
  for (const auto& v : variables_) {
    if (skip_row_sparse && !v->moving_average.has_value() &&
        rules_.Of(v->name) == proto::GRADIENT_ROW_SPARSE) {
      continue;
    }
    proto::ShardCheckpoint::Variable* out = checkpoint->add_variables();
    out->set_name(v->name);
    if (v->moving_average) out->set_moving_average_momentum(*v->moving_average);
    absl::MutexLock lock(&v->mu);
    tensor::SetFloatTensor(v->shape, v->values, out->mutable_value());
    for (const auto& slot : v->slots) tensor::SetFloatTensor(v->shape, slot, out->add_slots());
  }
}

absl::StatusOr<VariableStore> VariableStore::Restore(const proto::ShardCheckpoint& checkpoint,
                                                     const proto::OptimizerConfig& config,
                                                     const std::string& where) {
  VariableStore store;
  store.set_optimizer(config);
  const size_t num_slots = static_cast<size_t>(store.num_slots());
  // A checkpoint that fails what CreateVariables checks is damaged data:
  // every such error becomes DATA_LOSS, deliberately (not the INVALID_ARGUMENT
  // the checks give a caller's request).
  for (const proto::ShardCheckpoint::Variable& v : checkpoint.variables()) {
    // Exactly what CreateVariables accepts, plus the slots.
    const std::string what = absl::StrCat(where, ": variable \"", v.name(), "\"");
    if (absl::Status s = CheckName(v.name()); !s.ok()) {
      return absl::DataLossError(absl::StrCat(where, ": ", s.message()));
    }
    if (absl::Status s = ValidateVariable(v.name(), v.value(), what); !s.ok()) {
      return absl::DataLossError(s.message());
    }
    if (store.index_.contains(v.name())) {
      return absl::DataLossError(absl::StrCat(what, ": repeated name"));
    }
    std::optional<float> moving_average;
    if (v.has_moving_average_momentum()) {
      moving_average = v.moving_average_momentum();
      if (absl::Status s = optimizer::CheckMovingAverageMomentum(*moving_average, v.name());
          !s.ok()) {
        return absl::DataLossError(absl::StrCat(where, ": ", s.message()));
      }
    }
    if (static_cast<size_t>(v.slots_size()) != num_slots) {
      return absl::DataLossError(
          absl::StrCat(what, ": ", v.slots_size(), " slots, want ", num_slots));
    }
    for (size_t k = 0; k < num_slots; ++k) {
      const std::string slot = absl::StrCat(what, " slot ", k);
      absl::Status s = tensor::ValidateFloatTensor(v.slots(k), slot);
      if (s.ok() &&
          !SameShape(std::vector<int64_t>(v.value().shape().begin(), v.value().shape().end()),
                     v.slots(k).shape())) {
        s = absl::InvalidArgumentError(absl::StrCat(slot, ": shape differs from the variable's"));
      }
      if (s.ok() && tensor::FirstNonFinite(v.slots(k).data()) >= 0) {
        s = absl::InvalidArgumentError(absl::StrCat(slot, ": non-finite value"));
      }
      if (!s.ok()) return absl::DataLossError(s.message());
    }
    std::vector<int64_t> shape(v.value().shape().begin(), v.value().shape().end());
    const int64_t n = tensor::NumElements(shape);
    auto var = std::make_unique<Variable>(v.name(), shape, n, std::vector<float>(num_slots, 0.0f),
                                          moving_average);
    {
      absl::MutexLock lock(&var->mu);
      if (n > 0) std::memcpy(var->values.data(), v.value().data().data(), n * sizeof(float));
      for (size_t k = 0; k < num_slots; ++k) {
        if (n > 0) std::memcpy(var->slots[k].data(), v.slots(k).data().data(), n * sizeof(float));
      }
    }
    store.index_[v.name()] = static_cast<int>(store.variables_.size());
    store.variables_.push_back(std::move(var));
  }
  return store;
}

}  // namespace ps_server
}  // namespace psc
