#include "common/job/record_stream.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "common/job/job_data.h"
#include "common/job/job_model.h"
#include "common/records/shard_plan.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

// Record `id`'s 784 pixels: its id in the first three bytes, zeros after.
std::string IdRecord(int id) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  std::string pixels(784, '\0');
  pixels[0] = static_cast<char>(id & 255);
  pixels[1] = static_cast<char>((id >> 8) & 255);
  pixels[2] = static_cast<char>((id >> 16) & 255);
  f["x"].mutable_bytes_list()->add_value(pixels);
  f["y"].mutable_int64_list()->add_value(id % 10);
  return tfrecord::EncodeRecord(e.SerializeAsString());
}

// Files of `counts` records, ids numbered through them in order.
struct Files {
  io::testing::ScratchDir dir{"record_stream_test"};
  std::string glob;
  std::string spec;
  explicit Files(const std::vector<int>& counts) {
    int id = 0;
    for (size_t f = 0; f < counts.size(); ++f) {
      std::string bytes;
      for (int i = 0; i < counts[f]; ++i) bytes += IdRecord(id++);
      dir.Write(absl::StrCat("part-", f, ".tfrecord"), bytes);
    }
    glob = dir.path() + "/part-*.tfrecord";
    spec = dir.Write("spec.json", R"({"inputs": {"x": {"kind": "bytes", "dtype": "uint8"}},
                       "label": {"feature": "y", "kind": "int64"}})");
  }
};

proto::JobSpec StreamedJob(const Files& files, int batch, const std::string& extra = "") {
  proto::JobSpec job;
  job.set_model("mlp");
  job.set_seed(7);
  job.set_batch_size(batch);
  job.mutable_preprocessing()->set_kind(proto::Preprocessing::NONE);
  const absl::Status s = RecordDataFromFlag(
      absl::StrCat("tfrecord:train=", files.glob, ",spec=", files.spec, ",read=stream", extra),
      job.mutable_record_data());
  EXPECT_TRUE(s.ok()) << s;
  return job;
}

int IdOf(const data::Batch& b, int64_t i) {
  const float* x = b.images.data() + i * 784;
  return static_cast<int>(x[0]) + 256 * static_cast<int>(x[1]) + 65536 * static_cast<int>(x[2]);
}

struct Stream {
  compute::Model model;
  JobData data;
  std::unique_ptr<SlotBatches> batches;
};

Stream Open(const proto::JobSpec& job, bool training_only = true) {
  auto model = ModelForJob(job);
  EXPECT_TRUE(model.ok()) << model.status();
  auto data = training_only ? LoadTrainingData(job, *model) : LoadJobData(job, *model);
  EXPECT_TRUE(data.ok()) << data.status();
  auto batches = SlotBatches::ForJob(job, *model, *data, job.batch_size());
  EXPECT_TRUE(batches.ok()) << batches.status();
  EXPECT_NE(*batches, nullptr);  // the job streams
  return {*std::move(model), *std::move(data), *std::move(batches)};
}

std::vector<int> Ids(SlotBatches* s, int64_t step, int r, int R) {
  auto b = s->Batch(step, r, R);
  EXPECT_TRUE(b.ok()) << b.status();
  std::vector<int> ids;
  if (!b.ok()) return ids;
  EXPECT_EQ(b->step, step);
  for (size_t i = 0; i < b->labels.size(); ++i) {
    ids.push_back(IdOf(*b, static_cast<int64_t>(i)));
    EXPECT_EQ(b->labels[i], ids.back() % 10);  // the record's own label
  }
  return ids;
}

// Every record at most once an epoch, steps_per_epoch x batch of them,
// over the slots; each epoch in another order.
TEST(RecordStreamTest, EveryRecordOnceAnEpochOverTheSlots) {
  Files files({37, 0, 50, 13, 100});  // 200 records
  const proto::JobSpec job = StreamedJob(files, 16, ",shuffle_buffer=20");
  Stream s = Open(job);
  ASSERT_EQ(s.data.splits.train.count, 200);
  ASSERT_EQ(s.batches->steps_per_epoch(), 12);
  std::vector<std::vector<int>> orders;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int> seen;
    std::vector<int> order;
    for (int r = 0; r < 2; ++r) {
      for (int64_t t = epoch * 12; t < (epoch + 1) * 12; ++t) {
        const std::vector<int> ids = Ids(s.batches.get(), t, r, 2);
        ASSERT_EQ(ids.size(), 8u);
        for (int id : ids) {
          EXPECT_TRUE(id >= 0 && id < 200) << id;
          EXPECT_TRUE(seen.insert(id).second) << "record " << id << " twice in epoch " << epoch;
          order.push_back(id);
        }
      }
    }
    EXPECT_EQ(seen.size(), 192u);
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
}

// A slot's batches are a function of (seed, step, r, R, the counts): a
// stream started mid-epoch, or switched to another slot and back, gives
// the batches a stream read from the start gives.
TEST(RecordStreamTest, ResumingMidEpochGivesTheSameBatches) {
  Files files({60, 45, 95});
  const proto::JobSpec job = StreamedJob(files, 12, ",shuffle_buffer=25");
  Stream a = Open(job);
  std::vector<std::vector<int>> straight;
  for (int64_t t = 0; t < 40; ++t) straight.push_back(Ids(a.batches.get(), t, 1, 3));
  Stream b = Open(job);
  for (int64_t t : {7, 8, 9, 20, 3, 33, 34}) {
    EXPECT_EQ(Ids(b.batches.get(), t, 1, 3), straight[t]) << "step " << t;
    Ids(b.batches.get(), t, 0, 3);  // another slot in between
  }
  // Another R deals other pieces; back at R = 3 the batches are the same.
  EXPECT_NE(Ids(b.batches.get(), 5, 1, 2), straight[5]);
  EXPECT_EQ(Ids(b.batches.get(), 5, 1, 3), straight[5]);
}

// With --noshuffle (a buffer of one, the files in their order) a slot
// reads its pieces in order.
TEST(RecordStreamTest, NoShuffleReadsThePiecesInOrder) {
  Files files({30, 30, 40});
  proto::JobSpec job = StreamedJob(files, 10);
  job.set_no_shuffle(true);
  Stream s = Open(job);
  records::ShardPlanOptions o;
  o.records = {30, 30, 40};
  o.batch_size = 10;
  o.replicas = 2;
  o.seed = 7;
  o.shuffle_files = false;
  auto plan = records::ShardPlan::Create(o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->FileOrder(1), (std::vector<int>{0, 1, 2}));
  const int start[] = {0, 30, 60};
  std::vector<int> want;
  for (const records::Piece& p : plan->SlotEpoch(1, 1)) {
    for (int64_t i = 0; i < p.count; ++i) want.push_back(start[p.file] + p.first + i);
  }
  std::vector<int> got;
  for (int64_t t = 10; t < 20; ++t) {
    for (int id : Ids(s.batches.get(), t, 1, 2)) got.push_back(id);
  }
  EXPECT_EQ(got, want);
}

// The chief's view: the records counted (cached beside the spec), the
// validation_split's tail read as the validation split, standardization
// fitted on the first records as a whole read fits it on the same ones.
TEST(RecordStreamTest, TheChiefCountsAndTakesTheValidationTail) {
  Files files({50, 30, 20});
  proto::JobSpec job = StreamedJob(files, 10, ",validation_split=0.25");
  job.mutable_preprocessing()->set_kind(proto::Preprocessing::STANDARDIZE);
  Stream s = Open(job, /*training_only=*/false);
  EXPECT_TRUE(s.data.record.streamed);
  EXPECT_EQ(s.data.record.files_counted, 3);
  EXPECT_EQ(s.data.splits.train.count, 75);
  EXPECT_EQ(s.data.splits.validation.count, 25);
  EXPECT_EQ(s.data.train_records, (std::vector<int64_t>{50, 25, 0}));
  EXPECT_EQ(s.data.preprocessing.kind, data::Preprocessing::Kind::kStandardize);
  // The same job read whole: the same validation examples and the same fit
  // (all 75 training records are under kStandardizeRecords).
  proto::JobSpec whole = job;
  whole.mutable_record_data()->set_read("whole");
  auto model = ModelForJob(whole);
  ASSERT_TRUE(model.ok());
  auto all = LoadJobData(whole, *model);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->splits.validation.count, 25);
  EXPECT_DOUBLE_EQ(all->preprocessing.mean, s.data.preprocessing.mean);
  EXPECT_DOUBLE_EQ(all->preprocessing.std, s.data.preprocessing.std);
  // A second pass reads the counts file.
  Stream again = Open(job, false);
  EXPECT_EQ(again.data.record.files_counted, 0);
  // A worker takes the chief's counts.
  proto::JobSpec sent = job;
  for (int64_t n : s.data.train_records) sent.mutable_record_data()->add_train_records(n);
  Stream worker = Open(sent, true);
  EXPECT_EQ(worker.data.splits.train.count, 75);
  EXPECT_EQ(worker.data.record.files_counted, 0);
}

// A damaged record: an error naming the file; under --skip_corrupt_records
// skipped, counted, and the slot still gives full batches.
TEST(RecordStreamTest, ADamagedRecordFailsOrIsSkippedAndCounted) {
  Files files({40, 40});
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    std::string r = IdRecord(40 + i);
    if (i == 5) r[r.size() - 6] ^= 1;  // the data, so its CRC fails
    bytes += r;
  }
  const std::string damaged = files.dir.Write("part-1.tfrecord", bytes);
  proto::JobSpec job = StreamedJob(files, 8);
  {
    Stream s = Open(job);
    absl::Status failed;
    for (int64_t t = 0; t < 10 && failed.ok(); ++t) failed = s.batches->Batch(t, 0, 1).status();
    EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
    EXPECT_THAT(failed.message(), HasSubstr("part-1.tfrecord"));
  }
  job.mutable_record_data()->set_skip_corrupt_records(true);
  job.mutable_record_data()->set_max_skipped_fraction(0.05);
  Stream s = Open(job);
  std::set<int> seen;
  for (int64_t t = 0; t < 10; ++t) {
    for (int id : Ids(s.batches.get(), t, 0, 1)) seen.insert(id);
  }
  EXPECT_EQ(seen.count(45), 0u);
  EXPECT_EQ(seen.size(), 79u);  // one record read twice to fill the epoch
  // Another epoch reads it again: still one record skipped.
  for (int64_t t = 10; t < 20; ++t) Ids(s.batches.get(), t, 0, 1);
  const std::string path = std::filesystem::path(damaged).lexically_normal().string();
  ASSERT_EQ(s.batches->skipped().size(), 1u);
  ASSERT_EQ(s.batches->skipped().count(path), 1u);
  EXPECT_EQ(s.batches->skipped().at(path), (std::set<int64_t>{5}));
}

// A file shorter than its count (changed since it was counted) is
// DATA_LOSS naming it.
TEST(RecordStreamTest, AFileShorterThanItsCountIsDataLoss) {
  Files files({20, 20});
  proto::JobSpec job = StreamedJob(files, 8);
  job.mutable_record_data()->add_train_records(20);
  job.mutable_record_data()->add_train_records(28);  // more than part-1 holds
  Stream s = Open(job);
  absl::Status failed;
  for (int64_t t = 0; t < 6 && failed.ok(); ++t) failed = s.batches->Batch(t, 0, 1).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("part-1.tfrecord"));
  EXPECT_THAT(failed.message(), HasSubstr("changed since"));
}

// Reading ahead to a far step stops when its prefetcher is destroyed; a
// shuffle buffer over kMaxShuffleBufferBytes is refused.
TEST(RecordStreamTest, ReadingAheadStopsAndTheBufferIsBounded) {
  Files files({100, 100});
  Stream s = Open(StreamedJob(files, 10));
  std::atomic<bool> stop{true};
  auto stopped = s.batches->Batch(15, 0, 1, &stop);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
  EXPECT_THAT(stopped.status().message(), HasSubstr(kStreamError));
  EXPECT_EQ(Ids(s.batches.get(), 15, 0, 1).size(), 10u);  // afresh, not stopped
  EXPECT_TRUE(CheckShuffleBuffer(10000, 784).ok());
  const absl::Status big = CheckShuffleBuffer(int64_t{1} << 24, 784);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), HasSubstr("shuffle_buffer=16777216"));
  EXPECT_FALSE(CheckShuffleBuffer(int64_t{1} << 62, int64_t{1} << 40).ok());  // overflow
}

}  // namespace
}  // namespace job
}  // namespace psc
