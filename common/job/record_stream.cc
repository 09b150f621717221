#include "common/job/record_stream.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/job/job_loss.h"

namespace psc {
namespace job {
namespace {

// Row i of `from` into row j of `to` (both of these widths).
void CopyRow(const data::Batch& from, int64_t i, data::Batch* to, int64_t j, int64_t per_example,
             int64_t target_width) {
  std::copy_n(from.images.begin() + i * per_example, per_example,
              to->images.begin() + j * per_example);
  to->labels[j] = from.labels[i];
  if (!from.weights.empty()) to->weights[j] = from.weights[i];
  if (target_width > 0) {
    std::copy_n(from.targets.begin() + i * target_width, target_width,
                to->targets.begin() + j * target_width);
  }
}

// Room for n rows shaped as `like`'s.
void Shape(const data::Batch& like, int64_t n, int64_t per_example, int64_t target_width,
           data::Batch* out) {
  out->images.resize(n * per_example);
  out->labels.resize(n);
  out->weights.resize(like.weights.empty() ? 0 : n);
  out->targets.resize(n * target_width);
}

}  // namespace

bool StreamsRecords(const proto::JobSpec& job) {
  return job.has_record_data() && job.record_data().read() == "stream";
}

absl::StatusOr<std::unique_ptr<SlotBatches>> SlotBatches::ForJob(const proto::JobSpec& job,
                                                                 const compute::Model& model,
                                                                 const JobData& data,
                                                                 int64_t per_step) {
  if (!StreamsRecords(job)) return nullptr;
  std::unique_ptr<SlotBatches> s(new SlotBatches());
  s->job_ = job;
  PSC_ASSIGN_OR_RETURN(RecordReading reading, ReadingFor(job, model));
  s->reading_ = std::make_unique<RecordReading>(std::move(reading));
  PSC_ASSIGN_OR_RETURN(s->loader_, LoaderOptions(job, model, "the training files", 0));
  s->loader_.preprocessing = data::Preprocessing::Kind::kNone;
  s->loader_.validation_split = 0;
  s->loader_.max_train_examples = 0;
  s->loader_.sample_weight = s->reading_->spec.weight.has_value() ? "w_train" : "";
  s->preprocessing_ = data.preprocessing;
  const std::vector<int64_t>& train_records = data.train_records;
  const proto::RecordData& d = job.record_data();
  s->files_.assign(d.train().begin(), d.train().end());
  if (train_records.size() != s->files_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the job's record counts are for ",
                                                   train_records.size(), " files; it has ",
                                                   s->files_.size(), " training files"));
  }
  s->train_records_ = train_records;
  s->per_step_ = per_step;
  s->buffer_rows_ = job.no_shuffle()         ? 1
                    : d.shuffle_buffer() > 0 ? d.shuffle_buffer()
                                             : kDefaultShuffleBuffer;
  records::ShardPlanOptions o;
  o.records = s->train_records_;
  o.batch_size = per_step;
  o.replicas = 1;
  o.seed = job.seed();
  o.steps_per_epoch = job.steps_per_epoch();
  o.shuffle_files = !job.no_shuffle();
  PSC_ASSIGN_OR_RETURN(s->plan_, records::ShardPlan::Create(o));
  s->plan_replicas_ = 1;
  s->steps_per_epoch_ = s->plan_->steps_per_epoch();
  return s;
}

absl::Status CheckShuffleBuffer(int64_t rows, int64_t per_example) {
  const uint64_t bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(per_example) * 4;
  if (rows > 0 && per_example > 0 &&
      (bytes / 4 / static_cast<uint64_t>(per_example) != static_cast<uint64_t>(rows) ||
       bytes > kMaxShuffleBufferBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shuffle_buffer=", rows, ": a slot's buffer of examples of ", per_example,
                     " floats would hold ", bytes >> 20, " MiB; at most ",
                     kMaxShuffleBufferBytes >> 20, " MiB: give a smaller shuffle_buffer"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotBatches::Stream*> SlotBatches::Begin(int64_t epoch, int r, int R) {
  if (R < 1 || r < 0 || r >= R || per_step_ % R != 0) {
    return absl::InvalidArgumentError(absl::StrCat("slot ", r, " of ", R, ": R must divide the ",
                                                   per_step_, " records of a step"));
  }
  if (plan_replicas_ != R) {
    records::ShardPlanOptions o;
    o.records = train_records_;
    o.batch_size = per_step_;
    o.replicas = R;
    o.seed = job_.seed();
    o.steps_per_epoch = job_.steps_per_epoch();
    o.shuffle_files = !job_.no_shuffle();
    PSC_ASSIGN_OR_RETURN(plan_, records::ShardPlan::Create(o));
    plan_replicas_ = R;
  }
  if (streams_.size() >= kStreamsKept) {  // the oldest goes
    streams_.erase(
        std::min_element(streams_.begin(), streams_.end(),
                         [](const std::unique_ptr<Stream>& a, const std::unique_ptr<Stream>& b) {
                           return a->used < b->used;
                         }));
  }
  auto s = std::make_unique<Stream>();
  s->reader = std::make_unique<records::PieceReader>(io::LocalFileSystem(), files_,
                                                     plan_->SlotEpoch(epoch, r), &reading_->layout,
                                                     reading_->options);
  s->epoch = epoch;
  s->r = r;
  s->R = R;
  s->next_step = epoch * steps_per_epoch_;
  s->quota = steps_per_epoch_ * (per_step_ / R);
  s->rng = base::SplitMix64(base::Mix64(
      base::Mix64(base::Mix64(job_.seed() ^ 0x5053432D53545245ULL) + static_cast<uint64_t>(epoch)) +
      static_cast<uint64_t>(r)));
  // The buffer's first N rows.
  const int64_t fill = std::min(buffer_rows_, s->quota);
  for (int64_t i = 0; i < fill; ++i) {
    PSC_RETURN_IF_ERROR(TakeInput(*s, i));
    s->size = i + 1;
  }
  streams_.push_back(std::move(s));
  return streams_.back().get();
}

absl::Status SlotBatches::Refill(Stream& s) {
  const proto::RecordData& d = job_.record_data();
  records::RowBuffer rows(&reading_->layout);
  for (int attempt = 0;; ++attempt) {
    // No more than the epoch still takes (s.pending is used up).
    PSC_ASSIGN_OR_RETURN(const int64_t got,
                         s.reader->Read(std::min(kStreamChunk, s.quota - s.taken), &rows));
    for (const records::FileCount& f : s.reader->files()) {
      if (!f.skipped_at.empty()) skipped_[f.path].insert(f.skipped_at.begin(), f.skipped_at.end());
    }
    PSC_RETURN_IF_ERROR(CheckSkipped(d, "training files (streamed)", s.reader->skipped(), s.quota,
                                     s.reader->files()));
    if (got > 0) break;
    // The slot's pieces are read, and skipped records left it short: it
    // reads them again from the first (as the same rule does everywhere).
    if (s.pass_rows == 0 || attempt > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("slot ", s.r, " of ", s.R, " in epoch ", s.epoch,
                       ": every record of its pieces was skipped (--skip_corrupt_records)"));
    }
    s.reader->Rewind();
    s.pass_rows = 0;
  }
  s.pass_rows += rows.rows();
  PSC_ASSIGN_OR_RETURN(auto arrays, rows.Take("x_train", "y_train", "w_train"));
  PSC_ASSIGN_OR_RETURN(data::FashionMnist converted,
                       data::DatasetFromArrays(std::move(arrays), loader_));
  data::Split& split = converted.train;
  split.preprocessing = preprocessing_;
  // fit's class_weight, as a whole read applies it.
  split.weights = ExampleWeights(split.labels, split.weights, job_.loss());
  std::vector<int64_t> all(static_cast<size_t>(split.count));
  std::iota(all.begin(), all.end(), 0);
  PSC_ASSIGN_OR_RETURN(s.pending, data::GatherBatch(split, all, 0));
  s.pending_at = 0;
  if (per_example_ == 0) {
    per_example_ = split.pixels_per_example();
    target_width_ = split.target_width;
  }
  if (s.buffer.labels.empty()) {
    const int64_t rows = std::min(buffer_rows_, s.quota);
    PSC_RETURN_IF_ERROR(CheckShuffleBuffer(rows, per_example_));
    Shape(s.pending, rows, per_example_, target_width_, &s.buffer);
  }
  return absl::OkStatus();
}

absl::Status SlotBatches::TakeInput(Stream& s, int64_t at) {
  if (s.pending_at >= static_cast<int64_t>(s.pending.labels.size())) {
    PSC_RETURN_IF_ERROR(Refill(s));
  }
  CopyRow(s.pending, s.pending_at++, &s.buffer, at, per_example_, target_width_);
  ++s.taken;
  return absl::OkStatus();
}

absl::Status SlotBatches::Emit(Stream& s, data::Batch* out, int64_t at) {
  const int64_t p = static_cast<int64_t>(s.rng.Uniform(static_cast<uint64_t>(s.size)));
  CopyRow(s.buffer, p, out, at, per_example_, target_width_);
  if (s.taken < s.quota) return TakeInput(s, p);
  if (p != s.size - 1) CopyRow(s.buffer, s.size - 1, &s.buffer, p, per_example_, target_width_);
  --s.size;
  return absl::OkStatus();
}

absl::StatusOr<data::Batch> SlotBatches::Batch(int64_t step, int r, int R,
                                               const std::atomic<bool>* stop) {
  absl::StatusOr<data::Batch> b = Read(step, r, R, stop);
  if (b.ok()) return b;
  streams_.clear();  // none left half-read
  return absl::Status(b.status().code(), absl::StrCat(kStreamError, b.status().message()));
}

absl::StatusOr<data::Batch> SlotBatches::Read(int64_t step, int r, int R,
                                              const std::atomic<bool>* stop) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step ", step));
  const int64_t epoch = step / steps_per_epoch_;
  Stream* s = nullptr;
  for (const auto& kept : streams_) {
    if (kept->epoch == epoch && kept->r == r && kept->R == R && kept->next_step <= step) {
      s = kept.get();
    }
  }
  if (s == nullptr) {
    PSC_ASSIGN_OR_RETURN(s, Begin(epoch, r, R));
  }
  s->used = ++calls_;
  const int64_t share = per_step_ / R;
  if (s->next_step < step) {  // read past the steps in between
    data::Batch discard;
    Shape(s->buffer, share, per_example_, target_width_, &discard);
    for (; s->next_step < step; ++s->next_step) {
      if (stop != nullptr && stop->load()) {
        return absl::CancelledError(absl::StrCat("stopped reading ahead to step ", step));
      }
      for (int64_t i = 0; i < share; ++i) PSC_RETURN_IF_ERROR(Emit(*s, &discard, i));
    }
  }
  data::Batch out;
  Shape(s->buffer, share, per_example_, target_width_, &out);
  out.step = step;
  for (int64_t i = 0; i < share; ++i) PSC_RETURN_IF_ERROR(Emit(*s, &out, i));
  ++s->next_step;
  return out;
}

}  // namespace job
}  // namespace psc
