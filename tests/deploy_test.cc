// Label `deploy`: the project's own scripts. The dependency script is
// idempotent (returns at once when everything is installed, as after CI's
// first call), and every shell script parses.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(DeployTest, InstallDepsIsIdempotent) {
  auto r = RunProgram({"/bin/bash", std::string(PSC_SOURCE_DIR) + "/deploy/install_deps.sh"}, {},
                      absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_THAT(r->out, HasSubstr("packages already installed"));
  EXPECT_LT(r->wall, absl::Seconds(30)) << "the installed case must not touch the network";
}

TEST(DeployTest, InstallDepsRejectsUnknownArguments) {
  auto r =
      RunProgram({"/bin/bash", std::string(PSC_SOURCE_DIR) + "/deploy/install_deps.sh", "--bogus"},
                 {}, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("unknown argument '--bogus'"));
}

TEST(DeployTest, EveryShellScriptParses) {
  int scripts = 0;
  for (const char* dir : {"deploy", "tests/gpu", ".ci"}) {
    const std::filesystem::path root = std::filesystem::path(PSC_SOURCE_DIR) / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const std::string path = entry.path().string();
      if (!entry.is_regular_file()) continue;
      if (entry.path().extension() != ".sh" && entry.path().filename() != "run") continue;
      auto r = RunProgram({"/bin/bash", "-n", path}, {}, absl::Seconds(30));
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->exit.ToString(), "exit 0") << path << ": " << r->err;
      ++scripts;
    }
  }
  EXPECT_GE(scripts, 2);
}

}  // namespace
}  // namespace testing
}  // namespace psc
