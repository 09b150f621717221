#include "chief/work_queue.h"

#include <map>
#include <set>
#include <thread>
#include <utility>

#include "chief/testing/fakes.h"
#include "chief/unit_dispatcher.h"
#include "common/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace work_queue_test {
namespace {

using testing::FakeWorkerClient;
using testing::RecordingParameterClient;

bool NoneLost(int) { return false; }

std::vector<Piece> TakeAll(WorkQueue* q) {
  std::vector<Piece> out;
  while (std::optional<Piece> p = q->Take(0, NoneLost)) out.push_back(*p);
  return out;
}

TEST(WorkQueueTest, PiecesComeByStepRangeThenSlotAndCoverTheStretchOnce) {
  WorkQueue q(10, 25, /*unit_steps=*/6, /*num_slots=*/2);
  const std::vector<Piece> pieces = TakeAll(&q);
  ASSERT_EQ(pieces.size(), 6u);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{10, 16}, {16, 22}, {22, 25}};
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].first_step, ranges[i / 2].first);
    EXPECT_EQ(pieces[i].end, ranges[i / 2].second);
    EXPECT_EQ(pieces[i].slot, static_cast<int>(i % 2));
    EXPECT_FALSE(pieces[i].push_as.has_value());
  }
  EXPECT_TRUE(q.empty());
}

TEST(WorkQueueTest, AGivenBackPieceComesFirstPushedAsItsLostWorker) {
  WorkQueue q(0, 8, 4, 2);
  const Piece first = *q.Take(3, NoneLost);
  q.GiveBack(first, /*as=*/3);
  EXPECT_TRUE(q.WaitsAs(3));
  EXPECT_FALSE(q.WaitsAs(0));
  bool three_lost = true;
  auto lost = [&](int w) { return w == 3 && three_lost; };
  Piece again = *q.Take(0, lost);
  EXPECT_EQ(again.first_step, 0);
  EXPECT_EQ(again.slot, 0);
  EXPECT_EQ(again.push_as, 3);
  // Lost again: it still pushes as the first worker it was given to.
  q.GiveBack(again, 0);
  // Worker 3 is back: only it takes the piece pushed as it.
  three_lost = false;
  const Piece other = *q.Take(0, lost);
  EXPECT_EQ(other.first_step, 0);
  EXPECT_EQ(other.slot, 1);
  EXPECT_FALSE(other.push_as.has_value());
  EXPECT_TRUE(q.HasFor(3, lost));
  EXPECT_EQ(q.Take(3, lost)->push_as, 3);
  EXPECT_FALSE(q.WaitsAs(3));
  const proto::RunUnitRequest r = PieceRequest("job", again, 2);
  EXPECT_EQ(r.unit(), 0);
  EXPECT_EQ(r.num_steps(), 4);
  EXPECT_EQ(r.replica_slot(), 0);
  EXPECT_EQ(r.num_slots(), 2);
  EXPECT_EQ(r.push_as_worker(), 3);
}

// Kept slots: two workers taking turns each keep to one slot, so each
// reads its stream on; every piece is handed out once.
TEST(WorkQueueTest, WithKeptSlotsEachWorkerFollowsOnInItsOwnSlot) {
  WorkQueue q(0, 40, /*unit_steps=*/4, /*num_slots=*/2, /*keep_slots=*/true);
  std::map<int, std::vector<Piece>> got;
  std::set<std::pair<int64_t, int>> seen;
  for (int i = 0; i < 20; ++i) {
    const int w = i % 2;
    std::optional<Piece> p = q.Take(w, NoneLost);
    ASSERT_TRUE(p.has_value()) << i;
    EXPECT_TRUE(seen.insert({p->first_step, p->slot}).second) << "handed out twice";
    got[w].push_back(*p);
    q.Done(*p);
  }
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.Take(0, NoneLost).has_value());
  EXPECT_EQ(q.frontier(), 40);
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(got[w].size(), 10u);
    for (size_t i = 0; i < got[w].size(); ++i) {
      EXPECT_EQ(got[w][i].slot, w);
      EXPECT_EQ(got[w][i].first_step, static_cast<int64_t>(4 * i));
    }
  }
  EXPECT_EQ(q.last_slots(), (std::map<int, int>{{0, 0}, {1, 1}}));
}

// A worker whose slot is out joins the slot with the most pieces left, at
// its next piece: each slot's pieces go out in step order, so every
// worker's pushes of a slot go up in steps (the servers' ledger counts a
// lower step as a duplicate).
TEST(WorkQueueTest, WithKeptSlotsAFreeWorkerJoinsTheSlotLeftAtItsNextPiece) {
  WorkQueue q(0, 8, 1, 2, true);
  ASSERT_EQ(q.Take(0, NoneLost)->slot, 0);  // step 0 of slot 0
  for (int64_t t = 0; t < 8; ++t) {         // the fast one does all of slot 1
    const Piece p = *q.Take(1, NoneLost);
    EXPECT_EQ(p.slot, 1);
    EXPECT_EQ(p.first_step, t);
    q.Done(p);
  }
  std::map<std::pair<int, int>, int64_t> last_step;  // (worker, slot) -> step
  std::vector<int64_t> slot0 = {0};
  for (int i = 0; i < 7; ++i) {
    const int w = i % 2 == 0 ? 1 : 0;
    const Piece p = *q.Take(w, NoneLost);
    EXPECT_EQ(p.slot, 0);
    auto [it, first] = last_step.emplace(std::make_pair(w, p.slot), p.first_step);
    if (!first) {
      EXPECT_GT(p.first_step, it->second) << "worker " << w << " went back in its slot";
      it->second = p.first_step;
    }
    slot0.push_back(p.first_step);
  }
  EXPECT_EQ(slot0, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(q.empty());
}

// Three workers on two slots: the third takes the slot with the most pieces
// left, at its next piece.
TEST(WorkQueueTest, WithKeptSlotsAWorkerBeyondTheSlotsSharesOne) {
  WorkQueue q(0, 6, 1, 2, true);
  EXPECT_EQ(q.Take(0, NoneLost)->slot, 0);
  EXPECT_EQ(q.Take(1, NoneLost)->slot, 1);
  EXPECT_EQ(q.Take(1, NoneLost)->first_step, 1);
  const Piece third = *q.Take(2, NoneLost);
  EXPECT_EQ(third.slot, 0);
  EXPECT_EQ(third.first_step, 1);
  EXPECT_EQ(q.Take(0, NoneLost)->first_step, 2) << "slot 0's next, after the third's";
}

// Kept slots across stretches (Follows), and a lost worker's slot: a worker
// whose slot is out takes a slot no live worker keeps, here the lost one's;
// two workers that keep one slot (one came back to find it taken) part
// while another slot is free.
TEST(WorkQueueTest, WithKeptSlotsAWorkerFollowsOnAcrossStretchesAndTakesALostOnesRun) {
  WorkQueue q(100, 112, 4, 2, true);
  q.Follows(7, 1);
  q.Follows(3, 0);
  EXPECT_EQ(q.Take(7, NoneLost)->slot, 1);
  EXPECT_EQ(q.Take(3, NoneLost)->slot, 0);
  EXPECT_EQ(q.Take(3, NoneLost)->first_step, 104);
  bool three_lost = false;
  auto lost = [&](int w) { return w == 3 && three_lost; };
  three_lost = true;
  // Worker 7 ends its slot, then takes the lost one's run from its start.
  EXPECT_EQ(q.Take(7, lost)->first_step, 104);
  EXPECT_EQ(q.Take(7, lost)->first_step, 108);
  const Piece p = *q.Take(7, lost);
  EXPECT_EQ(p.slot, 0);
  EXPECT_EQ(p.first_step, 108);
  EXPECT_TRUE(q.empty());

  WorkQueue both(112, 118, 2, 2, true);
  both.Follows(3, 0);
  both.Follows(7, 0);
  EXPECT_EQ(both.Take(3, NoneLost)->slot, 1) << "slot 0 is kept by 7 too; slot 1 is free";
  EXPECT_EQ(both.Take(7, NoneLost)->slot, 0);
  EXPECT_EQ(both.Take(3, NoneLost)->slot, 1);
  EXPECT_EQ(both.last_slots(), (std::map<int, int>{{3, 1}, {7, 0}}));
}

// Any order of asking and finishing, with a worker lost (its piece in
// flight given back, run by another as it) and back, over two stretches
// (Follows): every piece is trained once, and the pieces each identity
// pushes of a slot go up in steps (what the servers' ledger needs; a piece
// given back is the same steps again), in order and with kept slots alike.
TEST(WorkQueueTest, EveryWorkersPiecesOfASlotGoUpInStepsWhoeverAsks) {
  for (const bool keep : {false, true}) {
    for (uint32_t seed = 1; seed <= 50; ++seed) {
      SCOPED_TRACE(::testing::Message() << "keep " << keep << " seed " << seed);
      uint32_t rng = seed;
      auto next = [&rng] { return (rng = rng * 1664525u + 1013904223u) >> 16; };
      std::map<std::pair<int, int>, int64_t> pushed;  // (identity, slot) -> last first step
      std::map<int, int> slots;                       // carried between stretches
      for (const auto& [first, end] : {std::pair<int64_t, int64_t>{0, 60}, {60, 90}}) {
        WorkQueue q(first, end, 3, 3, keep);
        for (const auto& [w, s] : slots) q.Follows(w, s);
        std::set<std::pair<int64_t, int>> done;
        std::map<int, Piece> running;  // per worker, its piece in flight
        bool two_lost = false;
        auto lost = [&two_lost](int w) { return two_lost && w == 2; };
        for (int i = 0; i < 400 && !(q.empty() && running.empty()); ++i) {
          if (i == 15 && running.count(2) != 0) {  // worker 2 is lost mid-piece
            two_lost = true;
            q.GiveBack(running[2], 2);
            running.erase(2);
          }
          if (i == 60) two_lost = false;
          const int w = static_cast<int>(next() % 4);
          if (lost(w)) continue;
          if (auto it = running.find(w); it != running.end()) {
            if (next() % 2 == 0) {  // it finishes its piece
              ASSERT_TRUE(done.insert({it->second.first_step, it->second.slot}).second);
              q.Done(it->second);
              running.erase(it);
            }
            continue;
          }
          std::optional<Piece> p = q.Take(w, lost);
          if (!p.has_value()) continue;
          const int as = p->push_as.value_or(w);
          auto [at, fresh] = pushed.emplace(std::make_pair(as, p->slot), p->first_step);
          if (!fresh) {
            ASSERT_GE(p->first_step, at->second) << "worker " << w << " as " << as;
            ASSERT_TRUE(p->first_step > at->second || p->push_as.has_value())
                << "worker " << w << " took step " << p->first_step << " of slot " << p->slot
                << " again";
            at->second = p->first_step;
          }
          running[w] = *p;
        }
        EXPECT_TRUE(q.empty());
        EXPECT_TRUE(running.empty());
        EXPECT_EQ(done.size(), static_cast<size_t>((end - first) / 3 * 3));
        EXPECT_EQ(q.frontier(), end);
        slots = q.last_slots();
      }
    }
  }
}

TEST(WorkQueueTest, TheFrontierMovesOverRangesDoneFromTheFirstOn) {
  WorkQueue q(0, 12, 4, 2);
  std::vector<Piece> p = TakeAll(&q);  // [0,4)x2, [4,8)x2, [8,12)x2
  EXPECT_EQ(q.frontier(), 0);
  q.Done(p[2]);
  q.Done(p[3]);
  EXPECT_EQ(q.frontier(), 0) << "the first range is not done";
  q.Done(p[0]);
  EXPECT_EQ(q.frontier(), 0);
  q.Done(p[1]);
  EXPECT_EQ(q.frontier(), 8);
  q.Done(p[4]);
  q.Done(p[5]);
  EXPECT_EQ(q.frontier(), 12);
}

class QueueDispatchTest : public ::testing::Test {
 protected:
  QueueDispatchTest()
      : membership_(MembershipOptions{proto::MODE_ASYNC, 3}, &servers_, &workers_, nullptr,
                    &clock_),
        dispatcher_(&workers_, &membership_, absl::Milliseconds(5)) {}

  // Runs `queue`; every piece done goes to done_.
  absl::Status Run(WorkQueue* queue, UnitDispatcher::QueueHooks hooks = {}) {
    hooks.done = [this](int worker, const Piece& piece, const proto::UnitMetrics&) {
      absl::MutexLock lock(&mu_);
      done_.emplace_back(worker, piece);
    };
    hooks.admit_poll = absl::Milliseconds(1);
    return dispatcher_.RunQueue("job", queue, hooks, &failures_);
  }
  int DoneBy(int worker) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [w, p] : done_) n += w == worker ? 1 : 0;
    return n;
  }
  // Every (range, slot) of the queue's stretch done exactly once.
  void ExpectEachPieceOnce(int64_t first, int64_t end, int64_t unit_steps, int slots) {
    absl::MutexLock lock(&mu_);
    std::map<std::pair<int64_t, int>, int> seen;
    for (const auto& [w, p] : done_) ++seen[{p.first_step, p.slot}];
    int64_t expected = 0;
    for (int64_t s = first; s < end; s += unit_steps) {
      for (int slot = 0; slot < slots; ++slot) {
        EXPECT_EQ((seen[{s, slot}]), 1) << "steps from " << s << ", slot " << slot;
        ++expected;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(done_.size()), expected);
  }

  base::FakeClock clock_;
  RecordingParameterClient servers_{1};
  FakeWorkerClient workers_{3};
  Membership membership_;
  UnitDispatcher dispatcher_;
  std::vector<absl::Status> failures_;
  absl::Mutex mu_;
  std::vector<std::pair<int, Piece>> done_ ABSL_GUARDED_BY(mu_);
};

// Polls `done` every millisecond for at most 20 s.
template <typename Pred>
void WaitFor(Pred done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
}

// Every worker hangs on its first piece; returns once each holds one.
void HoldEveryWorker(FakeWorkerClient* workers) {
  for (int w = 0; w < 3; ++w) workers->Hang(w);
}
bool EachHoldsAPiece(FakeWorkerClient* workers) {
  for (int w = 0; w < 3; ++w) {
    if (workers->calls(w).empty()) return false;
  }
  return true;
}

// No lock step: a worker held on its piece does not hold the others, who
// take every other piece; it is released once they have.
TEST_F(QueueDispatchTest, ABusyWorkerDoesNotHoldTheOthers) {
  HoldEveryWorker(&workers_);
  WorkQueue queue(0, 40, 4, 3);  // 30 pieces
  std::thread test([&] {
    WaitFor([&] { return EachHoldsAPiece(&workers_); });
    workers_.Release(0);
    workers_.Release(1);
    WaitFor([&] { return DoneBy(0) + DoneBy(1) >= 29; });
    workers_.Release(2);
  });
  const absl::Status s = Run(&queue);
  test.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(DoneBy(2), 1);
  EXPECT_EQ(DoneBy(0) + DoneBy(1), 29);
  ExpectEachPieceOnce(0, 40, 4, 3);
}

// Worker 1 dies on its piece (killed, its call ends).
void KillOne(FakeWorkerClient* workers) {
  workers->Kill(1);
  workers->Fail(1, absl::UnavailableError("connection refused"));
  workers->CancelUnit(1);
}

// A worker lost on its piece gives it back: another runs it, pushing as the
// lost worker, and every piece is done once.
TEST_F(QueueDispatchTest, ALostWorkersPieceIsRunAgainAsIt) {
  HoldEveryWorker(&workers_);
  WorkQueue queue(0, 12, 4, 3);
  std::thread test([&] {
    WaitFor([&] { return EachHoldsAPiece(&workers_); });
    KillOne(&workers_);
    WaitFor([&] { return membership_.lost(1); });
    workers_.Release(0);
    workers_.Release(2);
  });
  const absl::Status s = Run(&queue);
  test.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(membership_.lost(1));
  EXPECT_EQ(DoneBy(1), 0);
  ExpectEachPieceOnce(0, 12, 4, 3);
  absl::MutexLock lock(&mu_);
  int as_lost = 0;
  for (const auto& [w, p] : done_) as_lost += p.push_as == 1 ? 1 : 0;
  EXPECT_EQ(as_lost, 1) << "the piece worker 1 was given";
}

// A worker back while the queue runs takes pieces again, its own given back
// first; the admission asks only for a worker nothing is pushed as, and
// while it is taken back no other worker starts pushing as it.
TEST_F(QueueDispatchTest, AWorkerBackTakesPiecesAgain) {
  HoldEveryWorker(&workers_);
  WorkQueue queue(0, 60, 2, 3);
  UnitDispatcher::QueueHooks hooks;
  bool admitted = false;
  hooks.admit = [&](const std::function<bool(int)>& may_admit) {
    std::vector<int> out;
    if (!admitted && membership_.lost(1) && may_admit(1)) {
      // A free worker meanwhile takes fresh pieces, not worker 1's.
      workers_.Release(0);
      WaitFor([&] { return workers_.calls(0).size() >= 4; });
      workers_.Revive(1);
      workers_.Release(1);
      EXPECT_TRUE(membership_.Rejoin(1).ok());
      admitted = true;
      out.push_back(1);
    }
    return out;
  };
  std::thread test([&] {
    WaitFor([&] { return EachHoldsAPiece(&workers_); });
    KillOne(&workers_);
    // 2 holds the stretch open until worker 1 has trained a piece.
    WaitFor([&] { return DoneBy(1) >= 1; });
    workers_.Release(0);
    workers_.Release(2);
  });
  const absl::Status s = Run(&queue, hooks);
  test.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(membership_.lost(1));
  EXPECT_GE(DoneBy(1), 1);
  EXPECT_EQ(membership_.workers_rejoined(), 1);
  ExpectEachPieceOnce(0, 60, 2, 3);
  absl::MutexLock lock(&mu_);
  for (const auto& [w, p] : done_) {
    if (p.push_as.has_value()) {
      EXPECT_EQ(w, 1) << "the piece given back as worker 1 is its own again once it is back";
    }
  }
}

TEST_F(QueueDispatchTest, APieceFailedWithItsWorkerAliveStopsTheQueue) {
  workers_.Fail(2, absl::InvalidArgumentError("ps:0 Push: gradient is not finite"));
  workers_.Hang(0);
  workers_.Hang(1);
  WorkQueue queue(0, 400, 4, 3);
  std::thread test([&] {
    WaitFor([&] { return !workers_.calls(2).empty(); });
    workers_.Release(0);
    workers_.Release(1);
  });
  const absl::Status s = Run(&queue);
  test.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  ASSERT_EQ(failures_.size(), 1u);
  EXPECT_FALSE(membership_.lost(2));
  EXPECT_FALSE(queue.empty()) << "no piece is handed out after the failure";
}

TEST_F(QueueDispatchTest, EveryWorkerLostEndsTheQueue) {
  for (int w = 0; w < 3; ++w) {
    workers_.Kill(w);
    workers_.Fail(w, absl::UnavailableError("connection refused"));
  }
  WorkQueue queue(0, 8, 4, 3);
  EXPECT_EQ(Run(&queue).code(), absl::StatusCode::kUnavailable);
}

TEST_F(QueueDispatchTest, TheFrontierIsReportedAsItMoves) {
  WorkQueue queue(0, 12, 4, 3);
  UnitDispatcher::QueueHooks hooks;
  std::vector<int64_t> reached;
  hooks.reached = [&](int64_t f) { reached.push_back(f); };
  ASSERT_TRUE(Run(&queue, hooks).ok());
  ASSERT_FALSE(reached.empty());
  EXPECT_EQ(reached.back(), 12);
  EXPECT_TRUE(std::is_sorted(reached.begin(), reached.end()));
}

}  // namespace
}  // namespace work_queue_test
}  // namespace chief
}  // namespace psc
