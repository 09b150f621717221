#include "common/base/shutdown.h"

#include <signal.h>

#include <thread>

#include "gtest/gtest.h"

namespace psc {
namespace base {
namespace {

TEST(ShutdownSignalTest, RequestWakesWaitAndKeepsTheFirstReason) {
  ShutdownSignal s;
  EXPECT_FALSE(s.requested());
  std::thread t([&] {
    s.Request("Shutdown RPC");
    s.Request("second");
  });
  EXPECT_EQ(s.Wait(), "Shutdown RPC");
  t.join();
  EXPECT_TRUE(s.requested());
}

TEST(ShutdownSignalTest, SigtermWakesWait) {
  BlockTerminationSignals();  // this thread and those it starts
  ShutdownSignal s;
  std::thread t([] { kill(getpid(), SIGTERM); });
  EXPECT_EQ(s.Wait(), "SIGTERM");
  t.join();
}

}  // namespace
}  // namespace base
}  // namespace psc
