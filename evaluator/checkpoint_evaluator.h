// The evaluator's core (DESIGN.md: "an optional evaluator task evaluates
// checkpoints on the side, as in TensorFlow"): reads every shard of one
// complete checkpoint that the parameter servers wrote (common/
// checkpoint_files.h; each shard's bytes are a proto::ShardCheckpoint),
// checks the placement it records against the model, and evaluates the
// model on a split (the validation split) with the CPU backend. The files
// are read by ranges (checkpoint_reader.h): the dense variables whole, and
// an embedding table trained by rows a batch's rows at a time, so that the
// evaluator never holds a whole table. Transport-free: it reads files and
// talks to no task.
//
// A checkpoint that is incomplete, corrupt or of another model is an error
// Status naming the checkpoint and, where there is one, the file; nothing
// here crashes on bad bytes.
#ifndef PSC_EVALUATOR_CHECKPOINT_EVALUATOR_H_
#define PSC_EVALUATOR_CHECKPOINT_EVALUATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/compute/backend.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/dataset.h"
#include "common/job/evaluation.h"
#include "common/job/job_loss.h"
#include "common/placement/placement.h"

namespace psc {
namespace evaluator {

// Reads shards 0 .. checkpoint.num_shards-1 of the checkpoint at
// checkpoint.step under `root` and returns the full variables, one host
// vector per entry of `variables` (model order, Keras layouts), bit for bit
// as the shards saved them. Every shard is read and verified before anything
// is assembled.
//
// Errors (messages name the checkpoint directory, and the file or shard):
//  - those of ReadShardCheckpoint, unchanged: NOT_FOUND when a shard's
//    .index is gone (pruned, or not yet written), DATA_LOSS for a corrupt,
//    truncated or missing data file or a bad index, FAILED_PRECONDITION for
//    files of another shard count only, INVALID_ARGUMENT for an empty root
//    or num_shards < 1.
//  - DATA_LOSS: a shard's bytes do not parse as a ShardCheckpoint, its
//    header (format, shard, shard count, step) disagrees with its file, the
//    shards record different placements, a variable tensor is malformed, or
//    a shard does not hold exactly the variables its placement puts there.
//  - FAILED_PRECONDITION: the checkpoint records no placement, or one for
//    another shard count than its files, or its placement does not place
//    exactly `variables` (another model, or other shapes).
// The files are read through `fs` (LocalFileSystem() when null).
absl::StatusOr<std::vector<std::vector<float>>> ReadCheckpointVariables(
    const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
    const std::vector<tensor::VariableShape>& variables, io::FileSystem* fs = nullptr);

// One model on the CPU backend, evaluated on one split, checkpoint after
// checkpoint. Thread-compatible: one thread at a time.
class CheckpointEvaluator {
 public:
  // `model_name` as keras::BuiltinModel takes it; `split` is not owned,
  // must outlive the evaluator and hold at least one example; `threads` as
  // compute::CreateCpuBackend takes it (0 = all cores). INVALID_ARGUMENT for
  // an unknown model, threads < 0 or an empty split. Checkpoints are read
  // through `fs` (not owned; LocalFileSystem() when null).
  static absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> Create(const std::string& model_name,
                                                                     const data::Split* split,
                                                                     int threads,
                                                                     io::FileSystem* fs = nullptr);
  // The same for a model already built (a job's: job/job_model.h).
  static absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> Create(compute::Model model,
                                                                     const data::Split* split,
                                                                     int threads,
                                                                     io::FileSystem* fs = nullptr);
  // And on a CPU backend of these options (a job's: job::CpuOptionsForJob,
  // its threads and --conv_algorithm).
  static absl::StatusOr<std::unique_ptr<CheckpointEvaluator>> Create(
      compute::Model model, const data::Split* split, const compute::CpuBackendOptions& cpu,
      io::FileSystem* fs = nullptr);

  // Reads the checkpoint (CheckpointReader, with ReadCheckpointVariables's
  // errors; the tables by rows, batch by batch) and evaluates the split:
  // mean loss, accuracy and the number of examples, exactly as
  // EvaluateSplit computes them with the whole variables. Errors of the
  // backend are returned as they are.
  absl::StatusOr<job::SplitMetrics> Evaluate(const std::string& root,
                                             const checkpoint::CompleteCheckpoint& checkpoint);

  const compute::Model& model() const { return model_; }
  // The job's loss (label smoothing, reduction; the split's weights are
  // its own) and compiled metrics; the default is Keras's plain
  // cross-entropy and the accuracy alone.
  void set_job(const proto::JobSpec& job) {
    loss_ = job::JobLoss(job);
    metrics_ = job::MetricsOf(job);
  }

 private:
  CheckpointEvaluator(compute::Model model, const data::Split* split, io::FileSystem* fs)
      : model_(std::move(model)), split_(split), fs_(fs) {}

  // The examples of one evaluation batch (job::EvaluateSplit's).
  static constexpr int64_t kBatch = 250;

  // Constant after construction.
  const compute::Model model_;
  const data::Split* const split_;
  io::FileSystem* const fs_;
  std::unique_ptr<compute::ComputeBackend> backend_;
  std::unique_ptr<compute::Executor> executor_;  // runs model_ on backend_
  job::JobLoss loss_;
  std::vector<proto::CompiledMetric> metrics_;
  // With tables trained by rows: model_ with tables of one batch's rows
  // (ps_client::RowTables::LocalModel) for the placement it was made for.
  std::unique_ptr<compute::Model> local_;
  std::unique_ptr<compute::Executor> local_executor_;
  std::string local_placement_;
};

}  // namespace evaluator
}  // namespace psc

#endif  // PSC_EVALUATOR_CHECKPOINT_EVALUATOR_H_
