#include "common/job/job_records.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "common/job/job_data.h"
#include "common/job/job_model.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

// A worker loads only the training files: a validation file it could not
// read does not stop it, and its training split is the chief's.
TEST(JobRecordsTest, AWorkerReadsOnlyTheTrainingFiles) {
  io::testing::ScratchDir dir("job_records_test");
  std::string records;
  for (int i = 0; i < 40; ++i) {
    tfexample::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["x"].mutable_bytes_list()->add_value(std::string(784, static_cast<char>(i)));
    f["y"].mutable_int64_list()->add_value(i % 10);
    records += tfrecord::EncodeRecord(e.SerializeAsString());
  }
  const std::string train = dir.Write("train.tfrecord", records);
  const std::string spec =
      dir.Write("spec.json", R"({"inputs": {"x": {"kind": "bytes", "dtype": "uint8"}},
                       "label": {"feature": "y", "kind": "int64"}})");
  proto::JobSpec job;
  job.set_model("mlp");
  job.mutable_preprocessing()->set_kind(proto::Preprocessing::STANDARDIZE);
  ASSERT_TRUE(RecordDataFromFlag(
                  absl::StrCat("tfrecord:train=", train, ",validation=", train, ",spec=", spec),
                  job.mutable_record_data())
                  .ok());
  // The validation file is one this process cannot read.
  job.mutable_record_data()->set_validation(0, dir.path() + "/gone.tfrecord");
  auto model = ModelForJob(job);
  ASSERT_TRUE(model.ok()) << model.status();

  auto all = LoadJobData(job, *model);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(all.status().message(), HasSubstr("gone.tfrecord"));

  auto training = LoadTrainingData(job, *model);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(training->splits.train.count, 40);
  EXPECT_EQ(training->splits.validation.count, 0);
  EXPECT_EQ(training->record.train_examples, 40);
}

}  // namespace
}  // namespace job
}  // namespace psc
