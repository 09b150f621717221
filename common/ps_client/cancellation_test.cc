#include "common/ps_client/cancellation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_client {
namespace {

TEST(CancellationTest, CancelRunsTheHooksOfTheCallsInFlight) {
  Cancellation c;
  int ended = 0;
  Attempt a;
  a.scopes[0] = &c;
  {
    CancelScope scope(a, [&] { ++ended; });
    ASSERT_TRUE(scope.ok());
    c.Cancel();
    EXPECT_EQ(ended, 1);
    c.Cancel();
    EXPECT_EQ(ended, 1) << "idempotent";
  }
  CancelScope late(a, [&] { ++ended; });
  EXPECT_FALSE(late.ok()) << "a call after Cancel must not start";
  EXPECT_EQ(ended, 1);
}

TEST(CancellationTest, AFinishedCallIsNotCancelled) {
  Cancellation client, group;
  int ended = 0;
  Attempt a;
  a.scopes[0] = &client;
  a.scopes[1] = &group;
  {
    CancelScope scope(a, [&] { ++ended; });
  }
  group.Cancel();
  client.Cancel();
  EXPECT_EQ(ended, 0);
}

TEST(CancellationTest, EitherScopeEndsTheCall) {
  Cancellation client, group;
  int ended = 0;
  Attempt a;
  a.scopes[0] = &client;
  a.scopes[1] = &group;
  CancelScope scope(a, [&] { ++ended; });
  group.Cancel();
  EXPECT_EQ(ended, 1);
  Attempt b;
  b.scopes[0] = &client;
  b.scopes[1] = &group;
  CancelScope refused(b, [&] { ++ended; });
  EXPECT_FALSE(refused.ok());
  client.Cancel();
  EXPECT_EQ(ended, 2) << "only the first call, still registered with the client, ends";
}

}  // namespace
}  // namespace ps_client
}  // namespace psc
