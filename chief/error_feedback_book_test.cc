#include "chief/error_feedback_book.h"

#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

proto::RunUnitRequest UnitAt(int64_t first, int64_t steps) {
  proto::RunUnitRequest r;
  r.set_first_step(first);
  r.set_num_steps(steps);
  return r;
}

proto::UnitMetrics Ended(int identity, int64_t step, float value) {
  proto::UnitMetrics m;
  proto::ErrorFeedback* f = m.mutable_error_feedback();
  f->set_worker(identity);
  f->set_step(step);
  proto::NamedTensor* r = f->add_residuals();
  r->set_name("w");
  tensor::SetFloatTensor({1}, {value}, r->mutable_tensor());
  return m;
}

TEST(ErrorFeedbackBookTest, AUnitBringsResidualsOnlyWhereItsWorkerLacksThem) {
  ErrorFeedbackBook book;
  ASSERT_TRUE(book.Reset(0, {}).ok());
  // The first unit: zero residuals at step 0, sent.
  proto::RunUnitRequest r = UnitAt(0, 7);
  ASSERT_TRUE(book.Attach(1, &r).ok());
  ASSERT_TRUE(r.has_error_feedback());
  EXPECT_EQ(r.error_feedback().worker(), 1);
  EXPECT_EQ(r.error_feedback().step(), 0);
  EXPECT_EQ(r.error_feedback().residuals_size(), 0);
  ASSERT_TRUE(book.Record(1, Ended(1, 7, 0.5f)).ok());
  // The next: the worker holds them.
  r = UnitAt(7, 7);
  ASSERT_TRUE(book.Attach(1, &r).ok());
  EXPECT_FALSE(r.has_error_feedback());
  // Its unit failed: they are sent again.
  book.Forget(1);
  ASSERT_TRUE(book.Attach(1, &r).ok());
  ASSERT_TRUE(r.has_error_feedback());
  EXPECT_EQ(r.error_feedback().residuals(0).name(), "w");
}

TEST(ErrorFeedbackBookTest, AnHeirGetsTheLostWorkersAndThenItsOwnBack) {
  ErrorFeedbackBook book;
  ASSERT_TRUE(book.Reset(0, {}).ok());
  ASSERT_TRUE(book.Record(0, Ended(0, 7, 1.0f)).ok());
  ASSERT_TRUE(book.Record(1, Ended(1, 7, 2.0f)).ok());
  // Worker 1 is lost in the unit at 7; worker 0 redoes it as worker 1.
  book.Forget(1);
  proto::RunUnitRequest redo = UnitAt(7, 7);
  redo.set_push_as_worker(1);
  ASSERT_TRUE(book.Attach(0, &redo).ok());
  ASSERT_TRUE(redo.has_error_feedback());
  EXPECT_EQ(redo.error_feedback().worker(), 1);
  EXPECT_EQ(tensor::FloatValues(redo.error_feedback().residuals(0).tensor())[0], 2.0f);
  ASSERT_TRUE(book.Record(0, Ended(1, 14, 3.0f)).ok());
  // Worker 0's own unit at 14 needs its own back (it holds worker 1's).
  ASSERT_TRUE(book.Record(0, Ended(0, 14, 4.0f)).ok());  // its own unit at 7
  proto::RunUnitRequest next = UnitAt(14, 7);
  ASSERT_TRUE(book.Attach(0, &next).ok());
  EXPECT_FALSE(next.has_error_feedback()) << "its last unit was its own";
  ASSERT_EQ(book.State().workers_size(), 2);
  EXPECT_EQ(book.State().workers(1).step(), 14);
}

TEST(ErrorFeedbackBookTest, ARestoreSendsTheCheckpointsResidualsToEveryWorker) {
  ErrorFeedbackBook book;
  ASSERT_TRUE(book.Reset(0, {}).ok());
  ASSERT_TRUE(book.Record(0, Ended(0, 10, 1.0f)).ok());
  const proto::ErrorFeedbackState at10 = book.State();
  ASSERT_TRUE(book.Record(0, Ended(0, 17, 5.0f)).ok());
  ASSERT_TRUE(book.Reset(10, at10).ok());
  proto::RunUnitRequest r = UnitAt(10, 7);
  ASSERT_TRUE(book.Attach(0, &r).ok());
  ASSERT_TRUE(r.has_error_feedback());
  EXPECT_EQ(tensor::FloatValues(r.error_feedback().residuals(0).tensor())[0], 1.0f);
  // An identity the checkpoint does not hold starts from zero there.
  proto::RunUnitRequest other = UnitAt(10, 7);
  ASSERT_TRUE(book.Attach(1, &other).ok());
  EXPECT_EQ(other.error_feedback().step(), 10);
  EXPECT_EQ(other.error_feedback().residuals_size(), 0);
}

TEST(ErrorFeedbackBookTest, ResidualsOfAnotherStepOrNoneAreRefused) {
  ErrorFeedbackBook book;
  ASSERT_TRUE(book.Reset(0, {}).ok());
  ASSERT_TRUE(book.Record(0, Ended(0, 7, 1.0f)).ok());
  book.Forget(0);
  proto::RunUnitRequest r = UnitAt(14, 7);
  EXPECT_EQ(book.Attach(0, &r).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(r.has_error_feedback());
  EXPECT_EQ(book.Record(0, proto::UnitMetrics()).code(), absl::StatusCode::kInvalidArgument);
  proto::UnitMetrics bad = Ended(0, 7, 1.0f);
  bad.mutable_error_feedback()->mutable_residuals(0)->mutable_tensor()->set_data("xyz");
  EXPECT_EQ(book.Record(0, bad).code(), absl::StatusCode::kInvalidArgument);
  proto::ErrorFeedbackState twice;
  *twice.add_workers() = Ended(0, 7, 1.0f).error_feedback();
  *twice.add_workers() = Ended(0, 7, 1.0f).error_feedback();
  EXPECT_EQ(book.Reset(7, twice).code(), absl::StatusCode::kInvalidArgument);
}

// The work queue: an identity's next unit starts anywhere, so every unit
// brings its latest residuals, stamped with the unit's first step.
TEST(ErrorFeedbackBookTest, WithAnyStepEveryUnitBringsItsIdentitysLatest) {
  ErrorFeedbackBook book;
  book.set_any_step(true);
  ASSERT_TRUE(book.Reset(0, {}).ok());
  ASSERT_TRUE(book.Record(1, Ended(1, 7, 0.5f)).ok());
  proto::RunUnitRequest r = UnitAt(21, 7);  // not where worker 1 left off
  ASSERT_TRUE(book.Attach(1, &r).ok());
  ASSERT_TRUE(r.has_error_feedback()) << "sent although the worker holds them";
  EXPECT_EQ(r.error_feedback().worker(), 1);
  EXPECT_EQ(r.error_feedback().step(), 21);
  EXPECT_EQ(r.error_feedback().residuals(0).name(), "w");
  r = UnitAt(3, 7);
  r.set_push_as_worker(2);  // an identity with none yet: zeros
  ASSERT_TRUE(book.Attach(0, &r).ok());
  EXPECT_EQ(r.error_feedback().worker(), 2);
  EXPECT_EQ(r.error_feedback().step(), 3);
  EXPECT_EQ(r.error_feedback().residuals_size(), 0);
}

}  // namespace
}  // namespace chief
}  // namespace psc
