#include "common/job/step_batch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

proto::JobSpec Job(proto::TrainingMode mode, int64_t batch, int workers, int r) {
  proto::JobSpec job;
  job.mutable_policy()->set_mode(mode);
  job.mutable_policy()->set_replicas_to_aggregate(r);
  job.set_batch_size(batch);
  job.set_num_replicas(workers);
  return job;
}

TEST(StepBatchTest, WithoutBackupsAStepReadsTheBatch) {
  EXPECT_EQ(ExamplesReadPerStep(Job(proto::MODE_SYNC, 126, 3, 0)), 126);
  EXPECT_EQ(ExamplesReadPerStep(Job(proto::MODE_SYNC, 126, 3, 3)), 126);
  EXPECT_EQ(ExamplesReadPerStep(Job(proto::MODE_ASYNC, 126, 3, 2)), 126) << "R is sync's";
  EXPECT_FALSE(HasBackupWorkers(Job(proto::MODE_SYNC, 126, 3, 0)));
  EXPECT_EQ(ReplicasToAggregate(Job(proto::MODE_SYNC, 126, 3, 0)), 3);
}

// R = 2 of 3: each worker reads 126 / 2 = 63, a step 3 x 63.
TEST(StepBatchTest, BackupWorkersEachReadBatchOverR) {
  const proto::JobSpec job = Job(proto::MODE_SYNC, 126, 3, 2);
  EXPECT_TRUE(HasBackupWorkers(job));
  EXPECT_EQ(ReplicasToAggregate(job), 2);
  EXPECT_EQ(ExamplesReadPerStep(job), 189);
  proto::JobSpec collective = job;
  collective.set_strategy(proto::MULTI_WORKER_MIRRORED);
  EXPECT_FALSE(HasBackupWorkers(collective));
}

TEST(StepBatchTest, ValidateNamesTheFlags) {
  EXPECT_TRUE(ValidateStepBatch(Job(proto::MODE_SYNC, 126, 3, 2), 3).ok());
  EXPECT_TRUE(ValidateStepBatch(Job(proto::MODE_SYNC, 126, 3, 0), 3).ok());
  absl::Status s = ValidateStepBatch(Job(proto::MODE_SYNC, 126, 3, 4), 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--replicas_to_aggregate=4: must be in [0, 3]"));
  s = ValidateStepBatch(Job(proto::MODE_SYNC, 126, 3, -1), 3);
  EXPECT_THAT(s.message(), HasSubstr("--replicas_to_aggregate=-1"));
  s = ValidateStepBatch(Job(proto::MODE_SYNC, 125, 3, 2), 3);
  EXPECT_THAT(s.message(),
              HasSubstr("--batch_size=125 does not split into --replicas_to_aggregate=2"));
  s = ValidateStepBatch(Job(proto::MODE_SYNC, 128, 3, 0), 3);
  EXPECT_THAT(s.message(), HasSubstr("--batch_size=128 does not split evenly over 3 workers"));
}

// Backup workers with loss scaling: each server would choose its own R
// gradients of a step and could skip an overflow where another applies.
TEST(StepBatchTest, BackupWorkersAndLossScalingAreRefused) {
  proto::JobSpec job = Job(proto::MODE_SYNC, 126, 3, 2);
  job.mutable_policy()->mutable_loss_scale()->set_initial_scale(1024);
  job.mutable_policy()->mutable_loss_scale()->set_growth_steps(10);
  const absl::Status s = ValidateStepBatch(job, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--replicas_to_aggregate=2 of 3 workers (backup workers) "
                                     "with loss scaling"));
  job.mutable_policy()->set_replicas_to_aggregate(0);
  EXPECT_TRUE(ValidateStepBatch(job, 3).ok());
  job.mutable_policy()->set_replicas_to_aggregate(2);
  job.mutable_policy()->set_mode(proto::MODE_ASYNC);
  EXPECT_TRUE(ValidateStepBatch(job, 3).ok()) << "R is sync's";
}

}  // namespace
}  // namespace job
}  // namespace psc
