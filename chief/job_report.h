// What a job tells its user: the Keras-style progress bar, one record per
// epoch (loss and accuracy of the units trained, val_loss and val_accuracy),
// every validation point (step, training time, examples seen), per-worker
// step times, TensorBoard scalars as Keras's TensorBoard callback writes
// them, and the result file's content (DESIGN.md, "Result file") with the
// servers' counters.
//
// TensorBoard: two runs, <logdir>/train and <logdir>/validation, with
// Keras's tags, so the training and validation curves overlay: epoch_loss
// and epoch_accuracy at step = epoch index (0-based, as Keras counts), in
// both; epoch_examples_per_sec and epoch_staleness_mean in train; and in
// validation evaluation_loss_vs_iterations and
// evaluation_accuracy_vs_iterations at step = global step, at every
// validation point. The test loss and accuracy go to <logdir>/test as
// epoch_loss and epoch_accuracy at the last epoch's index.
#ifndef PSC_CHIEF_JOB_REPORT_H_
#define PSC_CHIEF_JOB_REPORT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chief/job_gauges.h"
#include "common/base/clock.h"
#include "common/job/compiled_metrics.h"
#include "common/job/evaluation.h"
#include "common/job/job_loss.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/ps_client/parameter_client.h"
#include "common/summary/event_file.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace chief {

struct JobReportOptions {
  const proto::JobSpec* job = nullptr;  // not owned
  int num_ps = 0;
  int num_workers = 0;
  int64_t steps_per_epoch = 1;
  job::ProgressPrinter* progress = nullptr;  // not owned; may be null
  // TensorBoard runs (not owned; all null, or none).
  summary::EventWriter* train_events = nullptr;
  summary::EventWriter* validation_events = nullptr;
  summary::EventWriter* test_events = nullptr;
  base::Clock* clock = nullptr;  // required
  absl::Time start;              // when the job began (wall_s)
  int64_t first_step = 0;        // where this chief began: 0, or the checkpoint it resumed from
  JobGauges* gauges = nullptr;   // not owned; may be null: the step, loss, validation
};

// Thread-compatible.
class JobReport {
 public:
  explicit JobReport(const JobReportOptions& options);

  // The metrics of one slot's unit (or of its redo), run by `worker`.
  void AddUnit(int worker, const proto::UnitMetrics& metrics);
  // The unit of work that `worker` did: steps [first_step, end) of slot
  // `slot` of `num_slots`, pushed as `push_as` (-1: itself). Listed in the
  // result file.
  void AddPiece(int worker, int64_t first_step, int64_t end, int slot, int num_slots, int push_as);
  // The examples of a unit whose metrics died with it (a worker lost in
  // sync, a collective group that failed): the epoch's `lost`.
  void AddLost(int64_t examples) { epoch_lost_ += examples; }
  // A unit of `steps` steps that took `took` is done; the job is at `step`.
  // Redraws the progress bar.
  void UnitDone(int64_t step, int64_t steps, absl::Duration took);
  // The epoch ending at `step` is done, with `validation` measured on its
  // final parameters: prints its line, records it, writes its scalars
  // (with the servers' staleness so far) and starts the next epoch.
  absl::Status EndEpoch(int64_t step, const job::SplitMetrics& validation,
                        ps_client::ParameterClient* servers);
  // A validation point at `step` (every --eval_every_steps and every epoch
  // end): recorded with the training time and the examples seen so far,
  // and written to the validation run.
  absl::Status AddEvaluation(int64_t step, const job::SplitMetrics& validation);
  // Training time so far: the units' time, without the evaluations,
  // checkpoints and recoveries between them.
  double train_s() const { return train_s_; }
  // The epochs ended so far (EndEpoch).
  const std::vector<job::EpochRecord>& epochs() const { return epochs_; }
  // The workers' membership for the epoch lines: `live` take part (of
  // `total` configured), after `lost` losses, `rejoined` returns, `joined`
  // new workers and `drained` leaves (shown once one of them is not 0).
  void set_workers(int64_t live, int64_t total, int64_t lost, int64_t rejoined, int64_t joined = 0,
                   int64_t drained = 0) {
    if (lost == 0 && rejoined == 0 && joined == 0 && drained == 0) {
      workers_note_.clear();
      return;
    }
    // More live than TF_CONFIG's when workers joined (async, ssp).
    workers_note_ = live <= total ? absl::StrCat(live, "/", total, " live, ")
                                  : absl::StrCat(live, " live (", total, " in TF_CONFIG), ");
    absl::StrAppend(&workers_note_, lost, " lost, ", rejoined, " rejoined");
    if (joined > 0) absl::StrAppend(&workers_note_, ", ", joined, " joined");
    if (drained > 0) absl::StrAppend(&workers_note_, ", ", drained, " drained");
  }
  // Streamed data files: the records the workers' units skipped, per file
  // (each record once, however many times it was read).
  std::map<std::string, int64_t> RecordsSkipped() const;
  // The learning rate the next epochs train at (ReduceLROnPlateau).
  void set_learning_rate(double lr) { learning_rate_ = lr; }

  // The result file's content at the end of the job.
  struct Final {
    job::SplitMetrics test;
    std::string variables_sha256;
    int64_t checkpoints_written = 0;
    int64_t workers_lost = 0;
    int64_t recoveries = 0;
    int64_t workers_joined = 0;
    int64_t workers_rejoined = 0;
    int64_t workers_drained = 0;
    int64_t regroups = 0;
    std::vector<job::MembershipRecord> membership;
    job::StopRecord stop;  // why training ended before its last epoch, if it did
  };
  absl::StatusOr<job::JobResult> Finish(const Final& final, ps_client::ParameterClient* servers);

 private:
  double ExamplesPerSecond(absl::Duration over) const;
  // Whether workers hide communication behind their backward pass (a
  // collective group; pushes in parts): the result then reports comm_s and
  // comm_hidden_fraction, and a worker's comm_s is the exposed part.
  bool Overlapped() const {
    return options_.job->strategy() == proto::MULTI_WORKER_MIRRORED ||
           options_.job->push().overlap();
  }

  const JobReportOptions options_;
  const job::JobLoss loss_kind_;   // how the loss is shown (a batch's sum under "sum")
  job::MetricSums train_metrics_;  // the epoch's compiled metrics so far
  const absl::Time start_;
  std::vector<job::EpochRecord> epochs_;
  double learning_rate_ = 0;
  // The epoch so far.
  absl::Time epoch_start_;
  double loss_ = 0;
  int64_t correct_ = 0, examples_ = 0;
  // The epoch's examples by where they went (EpochRecord).
  int64_t epoch_dropped_ = 0, epoch_skipped_ = 0, epoch_lost_ = 0;
  std::map<std::string, std::set<int64_t>> records_skipped_;
  // The job so far.
  double compute_s_ = 0, comm_s_ = 0;  // summed over workers
  double exposed_s_ = 0;               // of comm_s_, not hidden (summed over workers)
  double train_s_ = 0;
  int64_t examples_seen_ = 0;  // in applied gradients
  std::vector<job::EvaluationRecord> evaluations_;
  std::vector<job::WorkerRecord> workers_;
  int64_t trained_steps_ = 0;  // every step trained, redone ones again (throughput)
  int64_t high_water_ = 0;     // the furthest step reached: the job's distinct steps
  int64_t redone_steps_ = 0;
  std::vector<job::UnitRecord> units_;
  std::string workers_note_;  // set_workers   // steps trained again after a recovery
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_JOB_REPORT_H_
