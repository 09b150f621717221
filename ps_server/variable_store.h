// A shard's variables and the optimizer that updates them: creation
// (validated as a whole, all or nothing), matching a push's gradients to the
// variables, the two applies (one gradient per variable for async and ssp,
// a sync step's mean), reads for pulls, and the snapshot and replacement a
// checkpoint needs.
//
// Each variable carries its update rule. A trainable variable takes the
// optimizer. A moving average (parameter_server.proto's MovingAverage: Keras
// BatchNormalization's moving_mean and moving_variance) takes
// optimizer::ApplyMovingAverage with its momentum: its "gradient" is a batch
// statistic, and the sync mean of the step's statistics is one momentum
// update. A moving average keeps optimizer slots like every variable, so
// that a checkpoint has one layout; they stay zero and are never read.
//
// Thread-compatible as a set of variables: the Shard holds its reader/writer
// lock, shared to match, read or apply, exclusive to create, replace or
// snapshot. Each variable's values and optimizer slots have a mutex of their
// own, so concurrent async applies to one variable are serialized while
// applies to different variables run in parallel.
#ifndef PSC_PS_SERVER_VARIABLE_STORE_H_
#define PSC_PS_SERVER_VARIABLE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/optimizer/optimizer.h"
#include "google/protobuf/repeated_field.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"
#include "ps_server/sync_accumulator.h"

namespace psc {
namespace ps_server {

// How a shard's gradients travel: the job's wire dtype and top-k ratio, and
// the declarations of the variables whose gradient is not dense
// (ConfigureRequest.gradients).
struct GradientRules {
  proto::DataType wire = proto::DT_FLOAT32;
  double topk_ratio = 0;
  absl::flat_hash_map<std::string, proto::GradientEncoding> declared;
  // Variables pulled in float32 whatever the wire (pull_float32).
  absl::flat_hash_set<std::string> float32_pulls;

  // From a validated configuration: INVALID_ARGUMENT for a declaration
  // without a name, given twice, of an unknown encoding, or top-k without a
  // ratio.
  static absl::StatusOr<GradientRules> FromConfig(const proto::ConfigureRequest& config);
  // Variable `name`'s declaration (dense unless declared otherwise).
  proto::GradientEncoding Of(const std::string& name) const {
    auto it = declared.find(name);
    return it == declared.end() ? proto::GRADIENT_DENSE : it->second;
  }
  // The dtype variable `name` is pulled in when a pull asks for `wire`.
  proto::DataType PullDtype(const std::string& name, proto::DataType wire) const {
    return float32_pulls.contains(name) ? proto::DT_FLOAT32 : wire;
  }
};

class VariableStore {
 public:
  using Tensors = google::protobuf::RepeatedPtrField<proto::NamedTensor>;
  using Names = google::protobuf::RepeatedPtrField<std::string>;
  using MovingAverages = google::protobuf::RepeatedPtrField<proto::MovingAverage>;
  using Generated = google::protobuf::RepeatedPtrField<proto::GeneratedVariable>;

  VariableStore() = default;
  VariableStore(VariableStore&&) = default;
  VariableStore& operator=(VariableStore&&) = default;

  // The optimizer every variable's slots are kept for. Set before the first
  // Create (Configure), and again, of the same kind (the slots stay), to
  // change the learning rate.
  void set_optimizer(const proto::OptimizerConfig& config);
  const optimizer::Optimizer* optimizer() const { return optimizer_.get(); }

  bool empty() const { return variables_.empty(); }
  int size() const { return static_cast<int>(variables_.size()); }
  int64_t num_elements() const;
  const std::string& name(int i) const { return variables_[i]->name; }

  // Creates `variables` with their initial values, all or nothing: every
  // name valid and given once, every tensor a finite float32 tensor; each
  // of `moving_averages` names one of `variables`, at most once, with a
  // momentum finite in [0, 1] (CheckMovingAverageMomentum; 1: frozen), and the others
  // are trainable; else INVALID_ARGUMENT naming the variable. An existing
  // variable of the same name must have the same shape and the same rule
  // (trainable, or a moving average of the same momentum), and is left as
  // it is; else FAILED_PRECONDITION. Counts the new and the existing ones.
  // The `generated` ones (an embedding table's rows) are made here from
  // their initializer (tensor::InitializeRows), trainable, and checked as
  // the given ones are (ValidateGenerated: rows of their table).
  absl::Status Create(const Tensors& variables, const MovingAverages& moving_averages,
                      const Generated& generated, int* created, int* existing);
  absl::Status Create(const Tensors& variables, const MovingAverages& moving_averages, int* created,
                      int* existing) {
    return Create(variables, moving_averages, Generated(), created, existing);
  }
  // Create with every variable trainable.
  absl::Status Create(const Tensors& variables, int* created, int* existing) {
    return Create(variables, MovingAverages(), created, existing);
  }

  // The push's gradients in variable order as float32 bytes: exactly one
  // per variable but the frozen ones (optimizer::IsFrozen), of which the
  // push carries none (their entries stay empty), of the variable's shape,
  // each in rules.wire (the policy's wire dtype). float32 ones are views
  // into `gradients`; bfloat16 and float16 ones are decoded into `decoded`,
  // which the views point into. NOT_FOUND for an unknown name,
  // INVALID_ARGUMENT otherwise (a gradient in another dtype: its worker
  // runs another job's --wire_dtype; one for a frozen variable); `shard`
  // names this shard in messages. Each gradient travels as its variable is
  // declared (GradientRules::Of): GRADIENT_TOP_K must be sparse with
  // TopKCount(size, topk_ratio) values (common/tensor/topk.h) and is
  // scattered into `decoded`; GRADIENT_DENSE must be dense. A moving
  // average's statistic is always dense.
  //
  // GRADIENT_ROW_SPARSE must be row-sparse (Tensor.row_ids, whole rows of
  // the variable's width; no rows at all is a gradient of zeros): its view
  // is the packed rows (row_gradient.h), in `decoded`.
  absl::Status Match(const Tensors& gradients, int shard, std::vector<absl::string_view>* matched,
                     std::vector<std::vector<float>>* decoded) const;

  // How gradients travel (Shard::Configure's): Match decodes by them, the
  // updates apply row-sparse gradients by them.
  void set_gradient_rules(GradientRules rules) { rules_ = std::move(rules); }
  const GradientRules& gradient_rules() const { return rules_; }
  // Whether variable i's gradient travels row-sparse.
  bool row_sparse(int i) const;

  // Match's checks on names and shapes only (`gradients` may lack their
  // data), each gradient at most once: NOT_FOUND or INVALID_ARGUMENT.
  absl::Status CheckShapes(const Tensors& gradients, int shard) const;

  // The first non-finite value of `matched`: OK, or INVALID_ARGUMENT naming
  // the variable and the element.
  absl::Status CheckFinite(const std::vector<absl::string_view>& matched) const;

  // One update per variable with its gradient (async, ssp; none of a frozen
  // one). A row-sparse gradient updates only its rows where that is the
  // optimizer's whole update (RowsAreTheUpdate), else the whole variable
  // with zeros elsewhere (Keras's update of a dense gradient). The rest:
  // the optimizer's
  // for a trainable variable, ApplyMovingAverage with the statistic for a
  // moving average. `iteration` counts the updates before this one (Adam's
  // t - 1).
  void Apply(const std::vector<absl::string_view>& matched, int64_t iteration);
  // One update per variable, as Apply, with the mean of a sync step (for a
  // moving average: the mean of the step's statistics).
  void ApplyStep(const SyncAccumulator::Step& step, int64_t iteration);

  // NOT_FOUND for a name not on this shard, INVALID_ARGUMENT for one asked
  // twice.
  absl::Status CheckNames(const Names& names, int shard) const;
  // Copies the named variables (every one for no names) into `out`, in the
  // order asked, as `wire` (float32, bfloat16 or float16; a variable that
  // float16 cannot hold, as float32), the frozen ones left out with
  // `skip_frozen`; returns the bytes written. Names must have passed
  // CheckNames, `wire` WireElementBytes.
  // `skip_row_sparse` leaves out the variables whose gradient travels
  // row-sparse (their rows are pulled by ReadRows).
  int64_t Read(const Names& names, proto::DataType wire, bool skip_frozen, bool skip_row_sparse,
               Tensors* out) const;
  // Rows of variables as row-sparse tensors (PullRequest.rows), appended
  // to `out` in the order asked; returns the bytes written. A selection's
  // `slot` k >= 1 reads the rows of optimizer slot k - 1, in float32.
  // NOT_FOUND for a variable not on this shard, INVALID_ARGUMENT for one
  // asked twice or in `names` too, a scalar, bad row ids, or a slot the
  // variable does not have (naming the variable), before anything is
  // written.
  absl::StatusOr<int64_t> ReadRows(
      const google::protobuf::RepeatedPtrField<proto::RowSelection>& rows, const Names& names,
      int shard, proto::DataType wire, Tensors* out) const;
  // Whether update number `iteration` of a row whose gradient is zero
  // leaves the row and its slots as they are, so a row-sparse gradient may
  // update its rows alone: SGD, Adagrad, and Ftrl after its first update
  // (which sets every row from its linear term) without shrinkage or a
  // schedule; none with weight decay or clipnorm (a variable's norm). And
  // Adam with lazy_rows, by choice (lazy Adam is not Keras's result).
  bool RowsAreTheUpdate(int64_t iteration) const;

  // The variables, slots and rules (moving_average_momentum) into
  // `checkpoint`.
  // `skip_row_sparse` leaves out the variables whose gradient travels
  // row-sparse (an export reads them by rows).
  void Save(proto::ShardCheckpoint* checkpoint, bool skip_row_sparse = false) const;
  // The variables of `checkpoint`, verified (DATA_LOSS naming `where`), for
  // `config`'s optimizer. A variable without moving_average_momentum (every
  // one of a checkpoint written before the field) is trainable; one with it
  // is a moving average, its momentum held to what Create accepts.
  static absl::StatusOr<VariableStore> Restore(const proto::ShardCheckpoint& checkpoint,
                                               const proto::OptimizerConfig& config,
                                               const std::string& where);

 private:
  struct Variable {
    // One slot per value of `slot_initial_values` (the optimizer's), each
    // of `size` values at it.
    Variable(std::string n, std::vector<int64_t> s, int64_t size,
             const std::vector<float>& slot_initial_values, std::optional<float> moving_average);
    const std::string name;
    const std::vector<int64_t> shape;
    const int64_t size;  // elements
    // The momentum of a moving average; nullopt: trainable.
    const std::optional<float> moving_average;
    // Pushes carry no gradient for it, and nothing updates it.
    bool frozen() const { return optimizer::IsFrozen(moving_average); }
    mutable absl::Mutex mu;
    std::vector<float> values ABSL_GUARDED_BY(mu);
    std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  };

  int num_slots() const;
  // The index of the variable `g` names (NOT_FOUND), marked in `seen`
  // (INVALID_ARGUMENT when it already was).
  absl::StatusOr<int> Lookup(const proto::NamedTensor& g, int shard, std::vector<bool>* seen) const;
  // INVALID_ARGUMENT unless `g` has variable i's shape.
  absl::Status CheckShape(int i, const proto::NamedTensor& g) const;
  // One update of variable `v` (its lock held) with `grad`, by its rule.
  void ApplyOne(Variable& v, const float* grad, std::vector<float*>* slots, int64_t iteration)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(v.mu);
  // The same with a row-sparse gradient: `n` rows `ids` of `values`.
  void ApplyRows(Variable& v, int64_t n, const std::function<int64_t(int64_t)>& ids,
                 const std::function<const float*(int64_t)>& row, int64_t iteration)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(v.mu);

  std::unique_ptr<optimizer::Optimizer> optimizer_;
  GradientRules rules_;
  std::vector<std::unique_ptr<Variable>> variables_;
  absl::flat_hash_map<std::string, int> index_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_VARIABLE_STORE_H_
