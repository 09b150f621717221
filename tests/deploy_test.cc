// Label `deploy`: the project's own scripts. The dependency script is
// idempotent (returns at once when everything is installed, as after CI's
// first call), its --build-only list is a part of the whole one, every shell
// script parses, and the prebuilt image's context (deploy/docker/
// stage_prebuilt.sh) holds the five binaries, none of which loads CUDA.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Script(const std::string& path) {
  return (std::filesystem::path(PSC_SOURCE_DIR) / path).string();
}

// "all N packages already installed" -> N, or -1.
int PackagesInstalled(const std::string& out) {
  int n = -1;
  if (std::sscanf(out.c_str(), "install_deps.sh: all %d packages already installed", &n) != 1) {
    return -1;
  }
  return n;
}

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

TEST(DeployTest, InstallDepsBuildOnlyIsAPartOfTheWholeList) {
  auto whole = RunProgram({"/bin/bash", Script("deploy/install_deps.sh")}, {}, absl::Seconds(120));
  auto build = RunProgram({"/bin/bash", Script("deploy/install_deps.sh"), "--build-only"}, {},
                          absl::Seconds(120));
  ASSERT_TRUE(whole.ok() && build.ok());
  ASSERT_EQ(build->exit.ToString(), "exit 0") << build->err;
  const int n_whole = PackagesInstalled(whole->out);
  const int n_build = PackagesInstalled(build->out);
  EXPECT_GT(n_build, 10) << build->out;
  EXPECT_LT(n_build, n_whole) << whole->out << build->out;
}

TEST(DeployTest, ThePrebuiltImagesContextHoldsTheDaemonsWithoutCuda) {
  const std::string out = ::testing::TempDir() + "/psc_prebuilt_context";
  std::filesystem::remove_all(out);
  auto r = RunProgram({"/bin/bash", Script("deploy/docker/stage_prebuilt.sh"),
                       BinPath("ps_server").substr(0, BinPath("ps_server").rfind('/')), out},
                      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  for (const char* b : {"ps_server", "worker", "chief", "evaluator", "pscluster"}) {
    const std::string path = out + "/bin/" + b;
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    auto ldd = RunProgram({"/usr/bin/ldd", path}, {}, absl::Seconds(30));
    ASSERT_TRUE(ldd.ok());
    EXPECT_THAT(ldd->out, Not(HasSubstr("libcud"))) << path;
    EXPECT_THAT(ldd->out, Not(HasSubstr("libnccl"))) << path;
    EXPECT_THAT(ldd->out, Not(HasSubstr("not found"))) << path;
  }
  // The staged worker runs, without the GPU plugin (not staged).
  EXPECT_FALSE(std::filesystem::exists(out + "/bin/libpsc_cuda_plugin.so"));
  auto devices = RunProgram({out + "/bin/worker", "--list_devices"}, {}, absl::Seconds(30));
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->exit.ToString(), "exit 0") << devices->err;
  EXPECT_THAT(devices->out + devices->err,
              ::testing::ContainsRegex(
                  "GPU plugin: not loaded \\(no GPU plugin at .*psc_prebuilt_context/bin/"
                  "libpsc_cuda_plugin.so\\)"));
  std::ifstream list(out + "/runtime-packages");
  std::stringstream packages;
  packages << list.rdbuf();
  EXPECT_THAT(packages.str(), HasSubstr("libgrpc++1.51"));
  EXPECT_THAT(packages.str(), Not(HasSubstr("cuda")));
  EXPECT_TRUE(std::filesystem::exists(out + "/runtime_setup.sh"));
  std::filesystem::remove_all(out);
}

TEST(DeployTest, StagingNamesAMissingBinary) {
  const std::string empty = ::testing::TempDir() + "/psc_empty_bin";
  std::filesystem::create_directories(empty);
  auto r = RunProgram({"/bin/bash", Script("deploy/docker/stage_prebuilt.sh"), empty,
                       ::testing::TempDir() + "/psc_unused_context"},
                      {}, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 1");
  EXPECT_THAT(r->err, HasSubstr("no " + empty + "/ps_server (build it first)"));
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
