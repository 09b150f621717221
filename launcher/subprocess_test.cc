#include "launcher/subprocess.h"

#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace psc {
namespace launcher {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SubprocessTest, RunsWithEnvironmentAndCapturesOutput) {
  std::string out = ::testing::TempDir() + "/subprocess_out.txt";
  auto p = Subprocess::Spawn({.argv = {"/bin/sh", "-c", "echo \"$PSC_X\"; echo err >&2; exit 3"},
                              .env = {{"PSC_X", "hello"}},
                              .stdout_path = out,
                              .stderr_path = "=stdout"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto info = (*p)->Wait(absl::Seconds(30));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->exited);
  EXPECT_EQ(info->exit_code, 3);
  EXPECT_EQ(ReadAll(out), "hello\nerr\n");
}

TEST(SubprocessTest, WaitTimesOutThenStopEndsTheChild) {
  auto p = Subprocess::Spawn({.argv = {"/bin/sleep", "60"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ExitInfo info = (*p)->Stop(absl::Seconds(10));
  EXPECT_FALSE(info.exited);
  EXPECT_EQ(info.term_signal, SIGTERM);
  EXPECT_EQ(info.ToString(), "killed by signal 15");
}

TEST(SubprocessTest, MissingProgramIsAnError) {
  auto p = Subprocess::Spawn({.argv = {"/nonexistent/program"}});
  EXPECT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/program"), std::string::npos);
}

}  // namespace
}  // namespace launcher
}  // namespace psc

namespace psc {
namespace launcher {
namespace {

TEST(SubprocessTest, ForkPathRunsAndReportsExecFailures) {
  std::string out = ::testing::TempDir() + "/subprocess_fork.txt";
  auto p = Subprocess::Spawn({.argv = {"/bin/sh", "-c", "echo forked; exit 4"},
                              .stdout_path = out,
                              .die_with_parent = true});
  ASSERT_TRUE(p.ok()) << p.status();
  auto info = (*p)->Wait(absl::Seconds(30));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->ToString(), "exit 4");
  EXPECT_EQ(ReadAll(out), "forked\n");
  auto missing = Subprocess::Spawn({.argv = {"/nonexistent/x"}, .die_with_parent = true});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
}

TEST(SubprocessTest, ChildDiesWithTheThreadThatSpawnedIt) {
  std::unique_ptr<Subprocess> child;
  std::thread spawner([&] {
    auto p = Subprocess::Spawn({.argv = {"/bin/sleep", "60"}, .die_with_parent = true});
    ASSERT_TRUE(p.ok());
    child = *std::move(p);
  });
  spawner.join();  // the spawning thread is gone: the kernel sends SIGTERM
  ASSERT_NE(child, nullptr);
  auto info = child->Wait(absl::Seconds(30));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->ToString(), "killed by signal 15");
}

}  // namespace
}  // namespace launcher
}  // namespace psc
