#include "ps_server/push_parts.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;
using Verdict = PushAssembler::Verdict;

proto::PushRequest Part(int worker, int64_t step, int part, int num_parts,
                        const std::vector<std::string>& names, int64_t unit = 0) {
  proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_unit(unit);
  p.mutable_id()->set_step(step);
  p.mutable_id()->set_part(part);
  p.mutable_id()->set_num_parts(num_parts);
  p.set_computed_on_version(step);
  p.set_worker_clock(step + 1);
  for (const std::string& n : names) {
    proto::NamedTensor* t = p.add_gradients();
    t->set_name(n);
    t->mutable_tensor()->set_data(n + "-data");
  }
  return p;
}

std::vector<std::string> Names(const proto::PushRequest& p) {
  std::vector<std::string> out;
  for (const auto& g : p.gradients()) out.push_back(g.name());
  return out;
}

TEST(CheckPushPartsTest, WholePushesAndPartsInRangeOnly) {
  proto::PushId id;
  EXPECT_TRUE(CheckPushParts(id).ok());
  id.set_num_parts(1);
  EXPECT_TRUE(CheckPushParts(id).ok());
  id.set_part(1);
  EXPECT_THAT(CheckPushParts(id).message(), HasSubstr("part 1 out of range [0, 1)"));
  id.set_num_parts(3);
  id.set_part(2);
  EXPECT_TRUE(CheckPushParts(id).ok());
  id.set_part(3);
  EXPECT_EQ(CheckPushParts(id).code(), absl::StatusCode::kInvalidArgument);
  id.set_part(-1);
  EXPECT_EQ(CheckPushParts(id).code(), absl::StatusCode::kInvalidArgument);
  id.set_part(0);
  id.set_num_parts(kMaxPushParts + 1);
  EXPECT_THAT(CheckPushParts(id).message(), HasSubstr("num_parts"));
  id.set_num_parts(-2);
  EXPECT_EQ(CheckPushParts(id).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PushAssemblerTest, PartsInAnyOrderMakeOnePushInPartOrder) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 5, 2, 3, {"c"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(0, 5, 0, 3, {"a", "b"}), &whole), Verdict::kHeld);
  EXPECT_EQ(a.pushes(), 1);
  EXPECT_EQ(a.parts(), 2);
  proto::PushRequest last = Part(0, 5, 1, 3, {"d"});
  last.set_pull_after(true);
  last.set_pull_min_version(6);
  ASSERT_EQ(*a.Add(last, &whole), Verdict::kComplete);
  EXPECT_EQ(Names(whole), (std::vector<std::string>{"a", "b", "d", "c"}));
  EXPECT_EQ(whole.gradients(0).tensor().data(), "a-data");
  EXPECT_EQ(whole.id().step(), 5);
  EXPECT_EQ(whole.id().part(), 0);
  EXPECT_EQ(whole.id().num_parts(), 0);
  EXPECT_EQ(whole.computed_on_version(), 5);
  EXPECT_EQ(whole.worker_clock(), 6);
  EXPECT_TRUE(whole.pull_after());
  EXPECT_EQ(whole.pull_min_version(), 6);
  EXPECT_EQ(a.pushes(), 0);
  EXPECT_EQ(a.TakeAbandoned(), 0);
}

TEST(PushAssemblerTest, WorkersAndSlotsAssembleApart) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 1, 0, 2, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 1, 1, 2, {"b"}), &whole), Verdict::kHeld);
  proto::PushRequest slot1 = Part(0, 1, 1, 2, {"b"});
  slot1.mutable_id()->set_replica_slot(1);
  EXPECT_EQ(*a.Add(slot1, &whole), Verdict::kHeld);
  EXPECT_EQ(a.pushes(), 3);
  ASSERT_EQ(*a.Add(Part(1, 1, 0, 2, {"a"}), &whole), Verdict::kComplete);
  EXPECT_EQ(whole.id().worker(), 1);
  EXPECT_EQ(a.pushes(), 2);
}

TEST(PushAssemblerTest, ARetriedPartIsADuplicate) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 1, 0, 2, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(0, 1, 0, 2, {"a"}), &whole), Verdict::kDuplicate);
  EXPECT_EQ(a.parts(), 1);
}

TEST(PushAssemblerTest, AVariableInTwoPartsIsRefusedAndChangesNothing) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 1, 0, 3, {"a", "b"}), &whole), Verdict::kHeld);
  absl::StatusOr<Verdict> v = a.Add(Part(0, 1, 1, 3, {"c", "b"}), &whole);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("\"b\" came in an earlier part"));
  EXPECT_EQ(a.parts(), 1);
  // The right part still completes it.
  EXPECT_EQ(*a.Add(Part(0, 1, 1, 3, {"c"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(0, 1, 2, 3, {"d"}), &whole), Verdict::kComplete);
  EXPECT_EQ(Names(whole), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(PushAssemblerTest, ALaterStepReplacesAnUnfinishedPushAndAnEarlierOneIsStale) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 3, 0, 3, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(0, 3, 1, 3, {"b"}), &whole), Verdict::kHeld);
  // A backup that fell behind moved on to step 4.
  EXPECT_EQ(*a.Add(Part(0, 4, 2, 3, {"c"}), &whole), Verdict::kHeld);
  EXPECT_EQ(a.TakeAbandoned(), 2);
  EXPECT_EQ(a.parts(), 1);
  // A late retry of step 3 does not displace step 4.
  EXPECT_EQ(*a.Add(Part(0, 3, 2, 3, {"c"}), &whole), Verdict::kStale);
  EXPECT_EQ(a.parts(), 1);
  EXPECT_EQ(*a.Add(Part(0, 4, 0, 3, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(0, 4, 1, 3, {"b"}), &whole), Verdict::kComplete);
  EXPECT_EQ(whole.id().step(), 4);
}

TEST(PushAssemblerTest, AnHeirsPartsFinishTheLostWorkersPush) {
  // The lost worker sent parts 0 and 1; its heir redoes the step under its
  // identity and unit: those two are duplicates, part 2 completes it.
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(1, 7, 0, 3, {"a"}, 4), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 7, 1, 3, {"b"}, 4), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 7, 0, 3, {"a"}, 4), &whole), Verdict::kDuplicate);
  EXPECT_EQ(*a.Add(Part(1, 7, 1, 3, {"b"}, 4), &whole), Verdict::kDuplicate);
  EXPECT_EQ(*a.Add(Part(1, 7, 2, 3, {"c"}, 4), &whole), Verdict::kComplete);
  EXPECT_EQ(whole.id().unit(), 4);
  // Under another unit (a unit handed out anew) the heir's parts start over.
  EXPECT_EQ(*a.Add(Part(1, 8, 0, 2, {"a"}, 4), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 8, 0, 2, {"a"}, 5), &whole), Verdict::kHeld);
  EXPECT_EQ(a.TakeAbandoned(), 1);
  EXPECT_EQ(*a.Add(Part(1, 8, 1, 2, {"b"}, 5), &whole), Verdict::kComplete);
  EXPECT_EQ(whole.id().unit(), 5);
}

TEST(PushAssemblerTest, ClearDropsEveryUnfinishedPush) {
  PushAssembler a;
  proto::PushRequest whole;
  EXPECT_EQ(*a.Add(Part(0, 1, 0, 2, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 1, 0, 3, {"a"}), &whole), Verdict::kHeld);
  EXPECT_EQ(*a.Add(Part(1, 1, 2, 3, {"c"}), &whole), Verdict::kHeld);
  EXPECT_EQ(a.Clear(), 3);
  EXPECT_EQ(a.pushes(), 0);
  // Part 1 of worker 0 now begins a new push instead of completing one.
  EXPECT_EQ(*a.Add(Part(0, 1, 1, 2, {"b"}), &whole), Verdict::kHeld);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
