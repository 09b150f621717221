#include "common/metrics/connection_table.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

const absl::Time t0 = absl::FromUnixSeconds(1000);

std::vector<int> Overdue(ConnectionTable& table, absl::Time now) {
  std::vector<int> fds;
  table.ForEachOverdue(now, [&fds](int fd) { fds.push_back(fd); });
  return fds;
}

TEST(ConnectionTableTest, PastTheLimitAConnectionIsRefusedUntilOneCloses) {
  ConnectionTable table(2, absl::Seconds(5));
  ASSERT_TRUE(table.Admit());
  table.Started(10, t0);
  ASSERT_TRUE(table.Admit());  // admitted, not yet started: counts too
  EXPECT_FALSE(table.Admit());
  EXPECT_FALSE(table.Admit());
  EXPECT_EQ(table.open(), 2);
  EXPECT_EQ(table.refused(), 2);
  table.Started(11, t0);
  table.Closed(10);
  EXPECT_EQ(table.open(), 1);
  EXPECT_TRUE(table.Admit());
  table.Abandon();  // the server could not take it
  EXPECT_EQ(table.open(), 1);
}

TEST(ConnectionTableTest, AHeadThatMissesItsDeadlineIsClosedOnce) {
  ConnectionTable table(64, absl::Seconds(5));
  for (int fd : {3, 4, 5}) {
    ASSERT_TRUE(table.Admit());
    table.Started(fd, t0 + absl::Seconds(fd - 3));  // due at 5, 6 and 7 s
  }
  EXPECT_EQ(table.NextDeadline(), t0 + absl::Seconds(5));
  EXPECT_THAT(Overdue(table, t0 + absl::Seconds(4)), IsEmpty());
  EXPECT_THAT(Overdue(table, t0 + absl::Seconds(6)), UnorderedElementsAre(3, 4));
  // Not again, though still open until the server closes them.
  EXPECT_THAT(Overdue(table, t0 + absl::Seconds(6)), IsEmpty());
  EXPECT_EQ(table.NextDeadline(), t0 + absl::Seconds(7));
  EXPECT_EQ(table.open(), 3);
  EXPECT_EQ(table.overdue(), 2);
  table.Closed(3);
  table.Closed(4);
  EXPECT_EQ(table.open(), 1);
}

TEST(ConnectionTableTest, ARequestBeingAnsweredHasNoDeadlineAndKeepAliveGetsANewOne) {
  ConnectionTable table(64, absl::Seconds(5));
  ASSERT_TRUE(table.Admit());
  table.Started(7, t0);
  table.RequestBegan(7);  // the head arrived at once; the page takes long
  EXPECT_EQ(table.NextDeadline(), absl::InfiniteFuture());
  EXPECT_THAT(Overdue(table, t0 + absl::Minutes(1)), IsEmpty());
  table.RequestEnded(7, t0 + absl::Minutes(1));  // keep-alive: the next head
  EXPECT_THAT(Overdue(table, t0 + absl::Minutes(1) + absl::Seconds(4)), IsEmpty());
  EXPECT_THAT(Overdue(table, t0 + absl::Minutes(1) + absl::Seconds(5)), ElementsAre(7));
}

TEST(ConnectionTableTest, UnknownKeysAreIgnored) {
  ConnectionTable table(1, absl::Seconds(5));
  table.RequestBegan(9);
  table.RequestEnded(9, t0);
  table.Closed(9);
  EXPECT_EQ(table.open(), 0);
  EXPECT_THAT(Overdue(table, absl::InfiniteFuture()), IsEmpty());
}

}  // namespace
}  // namespace metrics
}  // namespace psc
