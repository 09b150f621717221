// Streamed training files (--data=...,read=stream): each replica slot reads
// the pieces of the files records::ShardPlan deals it for the epoch, a few
// records at a time, through a shuffle buffer of N rows (tf.data's
// shuffle: fill N, then emit a uniform pick and put the next record in its
// place; once the slot's records run out, the last row instead), and into
// the batches of its steps. A worker's memory is the buffer and a chunk,
// whatever the files hold.
//
// The batch of step t, slot r of R is a pure function of the seed, t, r,
// R and the files' record counts (the buffer is seeded from (seed, epoch,
// r)), so sync runs are reproducible and a slot taken over after a loss is
// read again as it was. It is not the .npz's batch (data/batch_plan.h):
// the examples are dealt by file pieces, not drawn from the whole split.
//
// Each chunk of records is converted by the NumPy loader
// (data::DatasetFromArrays) and read through the job's preprocessing, so a
// streamed example is the one a whole read gives.
#ifndef PSC_COMMON_JOB_RECORD_STREAM_H_
#define PSC_COMMON_JOB_RECORD_STREAM_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/splitmix64.h"
#include "common/compute/model.h"
#include "common/data/numpy_dataset.h"
#include "common/data/prefetcher.h"
#include "common/job/job_data.h"
#include "common/job/job_records.h"
#include "common/records/piece_reader.h"
#include "common/records/shard_plan.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// Standardization is fitted on the first this many training records (in
// the files' order), when the files are streamed.
inline constexpr int64_t kStandardizeRecords = 100000;
// Records read and converted at a time.
inline constexpr int64_t kStreamChunk = 256;
// The slots' streams a process keeps (async and ssp hand a worker the
// pieces of any slot): one asked for again goes on where it stopped.
inline constexpr size_t kStreamsKept = 4;
// The most bytes one slot's shuffle buffer may hold (its rows of float32
// examples): a larger shuffle_buffer is refused at start.
inline constexpr uint64_t kMaxShuffleBufferBytes = uint64_t{4} << 30;

// INVALID_ARGUMENT naming shuffle_buffer when `rows` examples of
// `per_example` floats pass kMaxShuffleBufferBytes.
absl::Status CheckShuffleBuffer(int64_t rows, int64_t per_example);

// What every error of a slot's stream starts with: the chief ends the job
// with such a unit failure (chief/unit_failure.h) rather than restoring
// the servers and redoing the unit, which would meet it again.
inline constexpr char kStreamError[] = "reading its training files: ";

// Whether the job's training files are streamed (read=stream).
bool StreamsRecords(const proto::JobSpec& job);

// Thread-compatible: one caller at a time (a unit's prefetch thread).
class SlotBatches {
 public:
  // The job's streamed training files as `data` loaded them
  // (LoadTrainingData or LoadJobData: its preprocessing and record counts),
  // `per_step` records a step (R divides it); null when the job does not
  // stream (StreamsRecords). Each chunk is converted by the NumPy loader
  // for the job's model (LoaderOptions). INVALID_ARGUMENT for counts that
  // hold no step (ShardPlan's errors) and the spec's against the model.
  static absl::StatusOr<std::unique_ptr<SlotBatches>> ForJob(const proto::JobSpec& job,
                                                             const compute::Model& model,
                                                             const JobData& data, int64_t per_step);

  // Step `step`'s batch for slot r of R (per_step / R examples): the slot's
  // stream goes on when it has not passed the step (reading past the steps
  // in between: another worker trained them); otherwise the slot's epoch
  // is read again from its start up to the step. Errors: the
  // readers' (NOT_FOUND naming a file, DATA_LOSS, INVALID_ARGUMENT naming
  // the record and feature); FAILED_PRECONDITION when the slot's records
  // skipped pass max_skipped_fraction of its epoch, or all were; CANCELLED
  // when *stop (may be null) is set while it reads past steps. Each
  // message starts with kStreamError; after an error every stream starts
  // afresh.
  absl::StatusOr<data::Batch> Batch(int64_t step, int r, int R,
                                    const std::atomic<bool>* stop = nullptr);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The records skipped (skip_corrupt) so far, per file: their indices in
  // it (a record read again in a later epoch is the same one).
  const std::map<std::string, std::set<int64_t>>& skipped() const { return skipped_; }

 private:
  // One slot's stream in one epoch.
  struct Stream {
    int64_t epoch = -1;
    int r = -1, R = 0;
    int64_t next_step = -1;  // the step it gives next
    int64_t quota = 0;       // rows the slot emits this epoch
    int64_t taken = 0;       // input rows taken into the buffer
    int64_t pass_rows = 0;   // rows the reader gave since its last rewind
    std::unique_ptr<records::PieceReader> reader;
    base::SplitMix64 rng{0};
    data::Batch buffer;  // min(N, quota) rows; `size` of them used
    int64_t size = 0;
    data::Batch pending;  // a converted chunk; rows [pending_at, ...) not taken
    int64_t pending_at = 0;
    int64_t used = 0;  // when last asked for (the oldest goes first)
  };

  SlotBatches() = default;
  absl::StatusOr<data::Batch> Read(int64_t step, int r, int R, const std::atomic<bool>* stop);
  // A fresh stream for slot r of R in `epoch`, in place of the oldest when
  // kStreamsKept are kept.
  absl::StatusOr<Stream*> Begin(int64_t epoch, int r, int R);
  // The next row of the slot's input (wrapping when skipped records left
  // it short) into the buffer's row `at`.
  absl::Status TakeInput(Stream& s, int64_t at);
  // Reads and converts the next chunk into s.pending.
  absl::Status Refill(Stream& s);
  // Emits one row of the shuffle buffer into out's row `at`.
  absl::Status Emit(Stream& s, data::Batch* out, int64_t at);

  proto::JobSpec job_;
  std::unique_ptr<RecordReading> reading_;  // the readers point into it
  data::NumpyDatasetOptions loader_;
  data::Preprocessing preprocessing_;
  std::vector<std::string> files_;
  std::vector<int64_t> train_records_;
  int64_t per_step_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t buffer_rows_ = 0;  // N

  // Per R, the plan (rebuilt when R changes).
  int plan_replicas_ = 0;
  std::optional<records::ShardPlan> plan_;

  std::vector<std::unique_ptr<Stream>> streams_;
  int64_t calls_ = 0;
  int64_t per_example_ = 0;  // floats of one example, once known
  int64_t target_width_ = 0;
  std::map<std::string, std::set<int64_t>> skipped_;
};

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_RECORD_STREAM_H_
