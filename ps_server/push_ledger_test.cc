#include "ps_server/push_ledger.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

proto::PushId Id(int worker, int64_t unit, int64_t step, int slot = 0) {
  proto::PushId id;
  id.set_worker(worker);
  id.set_unit(unit);
  id.set_step(step);
  id.set_replica_slot(slot);
  return id;
}

TEST(PushLedgerTest, ARecordedIdIsSeenAndOthersAreNot) {
  PushLedger ledger;
  EXPECT_FALSE(ledger.Seen(Id(0, 0, 0)));
  ledger.Record(Id(0, 0, 0));
  EXPECT_TRUE(ledger.Seen(Id(0, 0, 0)));
  EXPECT_FALSE(ledger.Seen(Id(0, 0, 1)));
  EXPECT_FALSE(ledger.Seen(Id(1, 0, 0))) << "another worker";
  EXPECT_FALSE(ledger.Seen(Id(0, 0, 0, 1))) << "another replica slot";
  EXPECT_FALSE(ledger.Seen(Id(0, 7, 0))) << "another unit at the same step";
}

TEST(PushLedgerTest, AStepSettlesEveryOlderStepOfItsKey) {
  PushLedger ledger;
  ledger.Record(Id(2, 10, 10, 1));
  ledger.Record(Id(2, 10, 11, 1));
  // A redone unit (an heir pushing as worker 2) repeats steps 10 and 11, and
  // a late copy of any older step is a retry: all are duplicates.
  EXPECT_TRUE(ledger.Seen(Id(2, 10, 10, 1)));
  EXPECT_TRUE(ledger.Seen(Id(2, 10, 11, 1)));
  EXPECT_TRUE(ledger.Seen(Id(2, 0, 3, 1)));
  // The next step is new.
  EXPECT_FALSE(ledger.Seen(Id(2, 10, 12, 1)));
}

TEST(PushLedgerTest, ItsSizeIsBoundedByTheKeysNotTheSteps) {
  PushLedger ledger;
  for (int64_t step = 0; step < 10000; ++step) {
    for (int w = 0; w < 3; ++w) ledger.Record(Id(w, step / 50 * 50, step, w));
    ASSERT_LE(ledger.size(), 3 * 2) << "at step " << step;
  }
  EXPECT_EQ(ledger.size(), 6);  // per key: a watermark and the newest step's id
}

TEST(PushLedgerTest, SaveAndRestoreKeepEveryVerdict) {
  PushLedger ledger;
  ledger.Record(Id(0, 0, 4));
  ledger.Record(Id(0, 0, 5));
  ledger.Record(Id(1, 3, 3, 1));
  ledger.Record(Id(1, 8, 3, 1));  // two units at one step: both stay exact
  proto::ShardCheckpoint ckpt;
  ledger.Save(&ckpt);
  ASSERT_EQ(ckpt.ledger_size(), 2);
  EXPECT_EQ(ckpt.seen_pushes_size(), 0);
  auto restored = PushLedger::Restore(ckpt);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->size(), ledger.size());
  for (const proto::PushId& id :
       {Id(0, 0, 4), Id(0, 0, 5), Id(0, 0, 6), Id(0, 9, 5), Id(1, 3, 3, 1), Id(1, 8, 3, 1),
        Id(1, 9, 3, 1), Id(1, 3, 2, 1), Id(1, 3, 4, 1)}) {
    EXPECT_EQ(restored->Seen(id), ledger.Seen(id)) << id.ShortDebugString();
  }
}

TEST(PushLedgerTest, RestoresACheckpointWrittenBeforeWatermarks) {
  // Builds before the ledger wrote every seen id, in no particular order.
  proto::ShardCheckpoint ckpt;
  for (int64_t step : {3, 0, 2, 1}) *ckpt.add_seen_pushes() = Id(0, 0, step);
  *ckpt.add_seen_pushes() = Id(1, 0, 0, 1);
  auto restored = PushLedger::Restore(ckpt);
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (int64_t step = 0; step <= 3; ++step) EXPECT_TRUE(restored->Seen(Id(0, 0, step)));
  EXPECT_TRUE(restored->Seen(Id(1, 0, 0, 1)));
  EXPECT_FALSE(restored->Seen(Id(0, 0, 4)));
  EXPECT_FALSE(restored->Seen(Id(1, 0, 1, 1)));
  EXPECT_EQ(restored->size(), 4);
}

TEST(PushLedgerTest, RestoreRefusesNegativeFields) {
  proto::ShardCheckpoint ckpt;
  *ckpt.add_seen_pushes() = Id(0, 0, -1);
  EXPECT_EQ(PushLedger::Restore(ckpt).status().code(), absl::StatusCode::kInvalidArgument);
  proto::ShardCheckpoint bad;
  bad.add_ledger()->set_worker(-2);
  EXPECT_EQ(PushLedger::Restore(bad).status().code(), absl::StatusCode::kInvalidArgument);
  proto::ShardCheckpoint mixed;
  auto* e = mixed.add_ledger();
  e->set_worker(0);
  *e->add_above() = Id(1, 0, 5);
  EXPECT_EQ(PushLedger::Restore(mixed).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
