#include "tests/testing/local_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/channel.h"
#include "gtest/gtest.h"
#include "launcher/free_port.h"
#include "nlohmann/json.hpp"
#include "proto/health.grpc.pb.h"

namespace psc {
namespace testing {

// The daemons are built beside the test binaries (<build>/bin): found from
// this process's own path, so no build path is compiled in.
std::string BinPath(const std::string& name) {
  static const std::string* const dir = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return new std::string(ec ? "." : exe.parent_path().string());
  }();
  return *dir + "/" + name;
}

int PickFreePort() {
  auto port = launcher::PickFreeLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 0;
}

std::string MakeTempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  std::string dir = absl::StrCat(::testing::TempDir(), "/", prefix, "-", getpid(), "-", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitForLog(const std::string& path, const std::string& text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ReadFile(path).find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

int LaunchedPid(const std::string& log, const std::string& task) {
  const std::string key = "[launcher] started " + task + " (pid ";
  const size_t at = log.find(key);
  return at == std::string::npos ? -1 : std::stoi(log.substr(at + key.size()));
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

ClusterSpec::ClusterSpec(int num_ps, int num_workers, bool with_chief, bool with_evaluator) {
  auto add = [&](const char* type, int n) {
    for (int i = 0; i < n; ++i)
      cluster_[type].push_back(absl::StrCat("127.0.0.1:", PickFreePort()));
  };
  if (with_chief) add("chief", 1);
  add("ps", num_ps);
  add("worker", num_workers);
  if (with_evaluator) add("evaluator", 1);
}

std::string ClusterSpec::TfConfig(cluster::TaskType type, int index) const {
  nlohmann::json j;
  j["cluster"] = cluster_;
  j["task"] = {{"type", std::string(cluster::TaskTypeName(type))}, {"index", index}};
  return j.dump();
}

std::string ClusterSpec::Address(cluster::TaskType type, int index) const {
  return cluster_.at(std::string(cluster::TaskTypeName(type))).at(index);
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const std::string& binary,
                                                      const std::string& tf_config,
                                                      const std::vector<std::string>& flags,
                                                      const std::string& log_dir) {
  static std::atomic<int> counter{0};
  std::string log = absl::StrCat(log_dir, "/", binary, "-", counter++, ".log");
  launcher::SubprocessOptions o;
  o.argv = {BinPath(binary)};
  o.argv.insert(o.argv.end(), flags.begin(), flags.end());
  o.env = {{"TF_CONFIG", tf_config}};
  o.stdout_path = log;
  o.stderr_path = "=stdout";
  auto p = launcher::Subprocess::Spawn(o);
  if (!p.ok()) return p.status();
  return std::unique_ptr<Daemon>(new Daemon(*std::move(p), log));
}

absl::StatusOr<RunResult> RunProgram(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env,
                                     absl::Duration timeout) {
  static std::atomic<int> counter{0};
  const std::string dir = MakeTempDir(absl::StrCat("run", counter++));
  launcher::SubprocessOptions o;
  o.argv = argv;
  o.env = env;
  o.unset_env = {"TF_CONFIG"};
  if (env.count("TF_CONFIG")) o.unset_env.clear();
  o.stdout_path = dir + "/out";
  o.stderr_path = dir + "/err";
  const absl::Time start = absl::Now();
  auto p = launcher::Subprocess::Spawn(o);
  if (!p.ok()) return p.status();
  auto exit = (*p)->Wait(timeout);
  if (!exit.ok()) return exit.status();  // the destructor kills it
  return RunResult{*exit, ReadFile(dir + "/out"), ReadFile(dir + "/err"), absl::Now() - start};
}

absl::Status WaitForServing(const std::string& address, const rpc::SecurityOptions& security,
                            absl::Duration timeout) {
  auto channel = rpc::CreateChannel(address, security);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline = absl::Now() + timeout;
  grpc::Status last;
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security, absl::Milliseconds(500));
    context.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckResponse response;
    last = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    if (last.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(10));  // between polls after a quick failure
  }
  return absl::DeadlineExceededError(absl::StrCat(
      address, " not serving after ", absl::FormatDuration(timeout), ": ", last.error_message()));
}

}  // namespace testing
}  // namespace psc
