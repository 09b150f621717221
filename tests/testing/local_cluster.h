// Helpers for multi-process tests: free loopback ports, TF_CONFIG for each
// task, daemons started as real processes (killed when the test ends),
// readiness polled with a deadline, and reading their logs.
#ifndef PSC_TESTS_TESTING_LOCAL_CLUSTER_H_
#define PSC_TESTS_TESTING_LOCAL_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_config.h"
#include "common/rpc/security.h"
#include "launcher/subprocess.h"

namespace psc {
namespace testing {

// <build>/bin/<name>.
std::string BinPath(const std::string& name);

// A port on 127.0.0.1 that was free a moment ago (bound to 0, then closed).
int PickFreePort();

// A fresh, empty directory under the test's temp dir.
std::string MakeTempDir(const std::string& prefix);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

// Polls `path` until it contains `text`, for at most `timeout`.
bool WaitForLog(const std::string& path, const std::string& text,
                absl::Duration timeout = absl::Seconds(60));

// The pid `pscluster launch` logged for `task` ("ps:1"), or -1.
int LaunchedPid(const std::string& log, const std::string& task);

// The addresses of a cluster on 127.0.0.1 with fresh ports.
class ClusterSpec {
 public:
  ClusterSpec(int num_ps, int num_workers, bool with_chief = true, bool with_evaluator = false);
  // The TF_CONFIG of one task.
  std::string TfConfig(cluster::TaskType type, int index) const;
  std::string Address(cluster::TaskType type, int index) const;
  const std::map<std::string, std::vector<std::string>>& cluster() const { return cluster_; }

 private:
  std::map<std::string, std::vector<std::string>> cluster_;
};

// One daemon process with its output in a log file.
class Daemon {
 public:
  // Starts <build>/bin/<binary> with TF_CONFIG in the environment.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const std::string& binary,
                                                       const std::string& tf_config,
                                                       const std::vector<std::string>& flags,
                                                       const std::string& log_dir);
  launcher::Subprocess& process() { return *process_; }
  // stdout and stderr so far.
  std::string Log() const { return ReadFile(log_path_); }
  const std::string& log_path() const { return log_path_; }

 private:
  Daemon(std::unique_ptr<launcher::Subprocess> p, std::string log)
      : process_(std::move(p)), log_path_(std::move(log)) {}
  std::unique_ptr<launcher::Subprocess> process_;
  std::string log_path_;
};

// Runs a program to completion (bounded by `timeout`) and returns its exit
// and its separate stdout and stderr.
struct RunResult {
  launcher::ExitInfo exit;
  std::string out;
  std::string err;
  absl::Duration wall;
};
absl::StatusOr<RunResult> RunProgram(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env,
                                     absl::Duration timeout);

// Polls gRPC health on `address` until SERVING or the deadline.
absl::Status WaitForServing(const std::string& address, const rpc::SecurityOptions& security,
                            absl::Duration timeout);

}  // namespace testing
}  // namespace psc

#endif  // PSC_TESTS_TESTING_LOCAL_CLUSTER_H_
