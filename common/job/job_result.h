// The result file of a job (DESIGN.md "Result file", --metrics_out): one
// JSON object that scripts, benchmarks and tests read; nobody parses logs.
#ifndef PSC_COMMON_JOB_JOB_RESULT_H_
#define PSC_COMMON_JOB_JOB_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/io/file_system.h"
#include "common/job/compiled_metrics.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double loss = 0, accuracy = 0, val_loss = 0, val_accuracy = 0;
  double wall_s = 0;
  double learning_rate = 0;  // what the epoch trained at; 0: not recorded
  // The compiled metrics (compiled_metrics.h) on the training batches and
  // on the validation split.
  MetricValues metrics, val_metrics;
  // The epoch's examples as this chief handed them out (its steps x the
  // examples a step reads), and where they went: trained (in gradients
  // applied), dropped as stale (a late backup), skipped (a late backup's
  // steps), or lost (in the unit of a worker lost in sync, or of a
  // collective group that failed, whose metrics died with it: some of its
  // steps may have been applied). trained + dropped + skipped + lost =
  // expected, unless a server recovery had steps trained again.
  int64_t examples_expected = 0, examples_trained = 0, examples_dropped = 0, examples_skipped = 0,
          examples_lost = 0;
};

// A validation point: every --eval_every_steps steps and every epoch end.
struct EvaluationRecord {
  int64_t step = 0;
  // Training time so far (the units' time: evaluations, checkpoints and
  // recoveries between units taken out), the clock of time-to-accuracy.
  double train_s = 0;
  int64_t examples_seen = 0;  // examples in the gradients applied so far
  double val_loss = 0, val_accuracy = 0;
};

// One worker's share of the job (its units, and redone units it ran).
struct WorkerRecord {
  int worker = 0;
  double straggler_factor = 1;  // worker --straggler_factor
  int64_t steps = 0;            // steps it computed
  double compute_s = 0;         // forward/backward (and a straggler's idling)
  double comm_s = 0;            // waiting on the servers or the all-reduce
  double idle_s = 0;            // of compute_s, the straggler's idling
  double data_wait_s = 0;       // waiting for batches (the prefetch behind)
  // Examples it computed, of those the ones the servers dropped as stale,
  // and (a late backup) the ones of the steps it skipped.
  int64_t examples = 0, examples_dropped = 0, examples_skipped = 0;
};

// One unit of work as it ran: steps [first_step, end) of replica slot
// `slot` of `num_slots`, trained by `worker`, pushed as `push_as` (a lost
// worker's unit run again; -1: as itself). Every unit done is recorded once.
struct UnitRecord {
  int64_t first_step = 0, end = 0;
  int slot = 0, num_slots = 1;
  int worker = 0;
  int push_as = -1;
};

// A change of the job's workers: at `step`, `worker` was "lost",
// "rejoined", "joined" (a new worker, docs/guide/membership.md) or
// "drained", and why.
struct MembershipRecord {
  int64_t step = 0;
  int worker = 0;
  std::string change;
  std::string why;
};

// What the result file records about the data (job_data.h loads it).
struct DataRecord {
  std::string source;         // "fashion-mnist:/usr/share/datasets/fashion-mnist" or "npz:PATH"
  std::string preprocessing;  // "standardize", "rescale" or "none"
  double mean = 0, std = 1;   // standardize, one pair
  double scale = 1;           // rescale
  int64_t train_examples = 0, validation_examples = 0, test_examples = 0;
  std::vector<double> feature_mean, feature_std;  // standardize per feature
  double offset = 0;                              // rescale
  // The model's own Rescaling or Normalization layer the examples were read
  // through, or "" (the job's flags).
  std::string preprocessing_layer;
  // The .npz array of the training examples' weights (or the data files'
  // feature), or "".
  std::string sample_weight;
  // Data files: the records skipped (--skip_corrupt_records) per file that
  // had any, and the seconds reading the files took (-1: no files).
  std::vector<std::pair<std::string, int64_t>> records_skipped;
  double read_seconds = -1;
  // Streamed (read=stream): the counting pass's seconds and files counted
  // (the others from the counts file beside the spec).
  bool streamed = false;
  double count_seconds = 0;
  int files_counted = 0;
};

// Why training ended before its last epoch (early stopping), and whose
// weights the test evaluation, the export and final_variables_sha256 are.
struct StopRecord {
  int64_t stopped_epoch = 0;  // 1-based; 0: trained every epoch
  std::string reason;
  int64_t best_epoch = 0;  // 1-based; 0: the last epoch's weights
  bool restored_best_weights = false;
};

struct JobResult {
  // What ran: when it started (RFC 3339, UTC) and the job as resolved from
  // its flags (SetJob). The build's version and commit are written with
  // them (common/base/build_info.h).
  std::string start_time;
  std::string job_json;  // JobSpec as JSON, without placement and model config
  uint64_t seed = 0;
  std::string mode;  // sync, async, ssp, or standalone
  // parameter_server, multi_worker_mirrored, mirrored or central_storage.
  std::string strategy = "parameter_server";
  std::string model;
  // What its layers computed in (Model::ComputeDtypesText): "float32",
  // "bfloat16", or the dtypes with their layer counts.
  std::string compute_dtypes = "float32";
  // Dynamic loss scaling (UpdatePolicy.loss_scale), when the job ran it:
  // its settings, the scale at the end, and the updates skipped for an
  // overflow with the gradients they held (shard 0's counts), and each
  // shard's scale and skipped updates (in sync all alike). Null in the
  // file without.
  struct LossScaleRecord {
    double initial = 0;
    int64_t growth_steps = 0;
    double final_scale = 0;
    int64_t steps_skipped = 0;
    int64_t gradients_skipped = 0;
    std::vector<double> shard_scales;
    std::vector<int64_t> shard_steps_skipped;
  };
  std::optional<LossScaleRecord> loss_scale;
  std::string optimizer;
  StopRecord stop;
  int num_ps = 0;
  int num_workers = 1;
  int64_t batch_size = 0;
  // The job's distinct global steps (a step redone after a recovery counts
  // once), and how many steps were trained again after a recovery rewound
  // the servers (gradients_accepted counts their pushes again).
  int64_t steps = 0;
  int64_t steps_redone = 0;
  std::vector<EpochRecord> epochs;
  // Null in the file when the data has no test split (test_examples 0).
  double test_loss = 0, test_accuracy = 0;
  MetricValues test_metrics;  // the compiled metrics on the test split
  DataRecord data;
  double wall_s = 0;
  double examples_per_sec = 0;
  int64_t gradients_accepted = 0, gradients_applied = 0, gradients_dropped_stale = 0,
          gradients_discarded = 0;
  double staleness_mean = 0, staleness_p99 = 0;
  int64_t staleness_max = 0;
  // Applies per staleness 0, 1, ... (trailing zeros dropped).
  std::vector<int64_t> staleness_histogram;
  int64_t staleness_bound = 0;        // ssp's s; 0 in the other modes
  int32_t replicas_to_aggregate = 0;  // sync's R; 0 in the other modes
  int64_t eval_every_steps = 0;
  // Training time (see EvaluationRecord) and the examples in applied
  // gradients; every validation point; every worker's share.
  double train_s = 0;
  int64_t examples_seen = 0;
  std::vector<EvaluationRecord> evaluations;
  std::vector<WorkerRecord> workers;
  int64_t checkpoints_written = 0, workers_lost = 0, recoveries = 0;
  // Workers taken into the job during it (a lost one back, or a new one
  // that joined), and (multi_worker_mirrored) groups formed again after a
  // loss.
  int64_t workers_joined = 0, regroups = 0;
  // Of workers_joined, the lost workers that took part again (every mode);
  // the others are new.
  int64_t workers_rejoined = 0;
  // Workers that left the job drained (asked to; not lost).
  int64_t workers_drained = 0;
  // Every unit of work done, with its worker, and every membership change,
  // in order.
  std::vector<UnitRecord> units;
  std::vector<MembershipRecord> membership;
  // Time the workers spent computing and communicating (pull, push,
  // waiting for the step), summed over workers.
  double worker_compute_s = 0, worker_comm_s = 0;
  // multi_worker_mirrored: the all-reduces' time summed over workers
  // (= worker_comm_s), and the part of it the backward pass hid:
  // 1 - (time waited for the all-reduce after the pass) / comm_s. Zero in
  // the other strategies, which do not overlap yet.
  double comm_s = 0, comm_hidden_fraction = 0;
  std::string final_variables_sha256;
  int threads = 0;
  // The process's peak resident set (getrusage ru_maxrss) when the file was
  // written; 0 leaves it out.
  double peak_rss_mb = 0;
};

// Fills seed and job_json from `job` and start_time from `start`.
void SetJob(const proto::JobSpec& job, absl::Time start, JobResult* result);

std::string JobResultJson(const JobResult& result);
// The closing line the chief and the standalone worker print:
// "test_loss: 0.3123 - test_accuracy: 0.8871 - 12.3s - 4567 training examples/s
// (evaluation excluded)": examples_per_sec, over the training time only
// ("no test split - ..." without test examples).
std::string FinalLine(const JobResult& result);

// Writes the JSON to `path` durably, through a temporary file and a rename
// (io::FileSystem::WriteFileAtomically on `fs`, LocalFileSystem() when
// null), so a reader never sees half a file. An error names the path.
absl::Status WriteJobResult(const std::string& path, const JobResult& result,
                            io::FileSystem* fs = nullptr);

// This process's peak resident set so far, in MiB (getrusage).
double PeakRssMb();

// SHA-256 (hex) of the variables' bytes, concatenated in name order.
std::string VariablesSha256(std::vector<std::pair<std::string, absl::Span<const float>>> variables);

// The same digest fed in pieces (a table read in chunks): every variable in
// name order, each one's values in order.
class VariablesDigest {
 public:
  VariablesDigest();
  ~VariablesDigest();
  VariablesDigest(const VariablesDigest&) = delete;
  VariablesDigest& operator=(const VariablesDigest&) = delete;
  void Add(absl::Span<const float> values);
  std::string Finish();  // hex; once

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_RESULT_H_
