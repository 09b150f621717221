// Small files that inflate to gigabytes (made by make_fuzz_seeds: a .keras
// whose config.json inflates to 3 GiB, an .npz whose 12 KB .npy inflates to
// 1 GiB), through the real binaries: `pscluster describe` and the chief's
// start-up check refuse them, naming the limit, and the process's peak
// resident memory (its rusage at exit) stays under 1 GiB, where reading
// them whole took 4.1 and 2.1 GiB. Release builds only: under ASan the
// shadow memory is not the product's.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

extern char** environ;

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

struct Measured {
  int exit_code = -1;
  long peak_rss_kib = 0;  // ru_maxrss of this child alone (wait4)
  std::string err;
};

// Runs argv to completion (stderr to a file) and takes its own rusage.
Measured RunMeasured(std::vector<std::string> argv, const std::string& dir) {
  Measured m;
  const std::string err = dir + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return m;
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return m;
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.peak_rss_kib = usage.ru_maxrss;
  std::ifstream in(err);
  m.err.assign(std::istreambuf_iterator<char>(in), {});
  return m;
}

class UserFileBombTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kSanitized) GTEST_SKIP() << "a sanitized build's memory is not the product's";
    dir_ = MakeTempDir("bombs");
    auto made = RunProgram({BinPath("make_fuzz_seeds"), dir_ + "/seeds"}, {}, absl::Seconds(120));
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_EQ(made->exit.ToString(), "exit 0") << made->err;
  }
  std::string dir_;
};

TEST_F(UserFileBombTest, DescribeRefusesAConfigThatInflatesTo3GiB) {
  const Measured m = RunMeasured(
      {BinPath("pscluster"), "describe", dir_ + "/seeds/bombs/config_bomb.keras"}, dir_);
  std::printf("pscluster describe of config_bomb.keras: exit %d, peak RSS %.1f MiB\n", m.exit_code,
              m.peak_rss_kib / 1024.0);
  EXPECT_EQ(m.exit_code, 2) << m.err;
  EXPECT_THAT(m.err, HasSubstr("config.json: would be inflated past the declared 67108864 bytes"));
  EXPECT_LT(m.peak_rss_kib, 1 << 20);  // 1 GiB
}

TEST_F(UserFileBombTest, TheChiefsCheckRefusesAnNpyThatInflatesTo1GiB) {
  const Measured m = RunMeasured({BinPath("chief"), "--check_job", "--model=mlp",
                                  "--data=" + dir_ + "/seeds/bombs/npz_bomb.npz"},
                                 dir_);
  std::printf("chief --check_job of npz_bomb.npz: exit %d, peak RSS %.1f MiB\n", m.exit_code,
              m.peak_rss_kib / 1024.0);
  EXPECT_EQ(m.exit_code, 2) << m.err;
  EXPECT_THAT(m.err, HasSubstr("x_train.npy: inflated past the declared 12416 bytes"));
  EXPECT_LT(m.peak_rss_kib, 1 << 20);  // 1 GiB
}

}  // namespace
}  // namespace testing
}  // namespace psc
