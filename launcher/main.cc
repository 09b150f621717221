// pscluster: the local launcher. `pscluster launch` starts a whole cluster on
// this machine on free loopback ports with a fresh token, and returns the
// chief's exit status.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/auth_token.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "launcher/flag_args.h"
#include "launcher/free_port.h"
#include "launcher/launch_plan.h"
#include "launcher/local_cluster.h"

ABSL_FLAG(int, ps, 1, "launch: number of ps tasks.");
ABSL_FLAG(int, workers, 2, "launch: number of worker tasks.");
ABSL_FLAG(std::string, token_file, "",
          "launch: use the cluster token in this file instead of generating one.");
ABSL_FLAG(absl::Duration, stop_grace, absl::Seconds(10),
          "launch: how long each task may take to stop before SIGKILL.");
ABSL_FLAG(bool, restart_failed, false,
          "launch: restart a ps or worker task that exits non-zero or is killed by a signal "
          "while the chief runs (never the chief; a task that exits 0 stays down).");
ABSL_FLAG(int, max_restarts, 3,
          "launch: with --restart_failed, how many times each task is restarted before it is "
          "left down; must not be negative.");
ABSL_FLAG(bool, evaluator, false,
          "launch: also start the evaluator task, which evaluates the chief's checkpoints on the "
          "side (needs --checkpoint_dir in the chief flags, which it takes too).");
ABSL_FLAG(absl::Duration, evaluator_grace, absl::Seconds(120),
          "launch: after the chief exits 0, how long the evaluator may take to evaluate the "
          "final checkpoint before it is stopped.");

namespace {

constexpr char kProgram[] = "pscluster";
constexpr char kUsage[] =
    "runs a pscluster job on this machine.\n"
    "Usage: pscluster launch [--ps=N] [--workers=N] [--token_file=F]\n"
    "                        [--restart_failed [--max_restarts=N]]\n"
    "                        [--evaluator [--evaluator_grace=D]] -- [chief flags]\n"
    "Starts N ps_server and N worker processes, with --evaluator the evaluator, and the chief\n"
    "on free 127.0.0.1 ports, each with its TF_CONFIG and a generated token; prefixes their\n"
    "output with the task name; with --restart_failed, restarts a ps, worker or evaluator that\n"
    "fails while the chief runs; stops all of them when the chief exits (after the evaluator\n"
    "finished, up to --evaluator_grace) or on Ctrl-C; exits with the chief's status.\n"
    "The evaluator takes the chief flags too (it needs --checkpoint_dir; it writes\n"
    "TensorBoard scalars to <logdir>/eval and takes --eval_out and --poll_interval).";

// The directory holding this executable; the daemons are beside it.
std::string OwnDirectory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = psc::daemon::InitDaemon(kUsage, argc, argv);
  if (args.size() < 2 || std::string(args[1]) != "launch") {
    std::fprintf(stderr, "pscluster: %s\n", kUsage);
    return psc::daemon::kExitConfigError;
  }
  std::vector<std::string> chief_flags(args.begin() + 2, args.end());
  if (absl::GetFlag(FLAGS_max_restarts) < 0) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--max_restarts must not be negative"));
  }
  const bool evaluator = absl::GetFlag(FLAGS_evaluator);
  if (evaluator) {
    const auto dir = psc::launcher::LastFlagValue(chief_flags, "checkpoint_dir");
    if (!dir.has_value() || dir->empty()) {
      return psc::daemon::ReportFailure(
          kProgram, absl::InvalidArgumentError("--evaluator needs --checkpoint_dir in the chief "
                                               "flags (after --): the evaluator reads the "
                                               "checkpoints there"));
    }
  }
  if (absl::GetFlag(FLAGS_evaluator_grace) < absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--evaluator_grace must not be negative"));
  }

  psc::launcher::LaunchOptions launch;
  launch.num_ps = absl::GetFlag(FLAGS_ps);
  launch.num_workers = absl::GetFlag(FLAGS_workers);
  launch.evaluator = evaluator;
  auto plan = psc::launcher::PlanLocalCluster(launch, psc::launcher::PickFreeLoopbackPorts);
  if (!plan.ok()) return psc::daemon::ReportFailure(kProgram, plan.status());
  if (absl::GetFlag(FLAGS_stop_grace) < absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--stop_grace must not be negative"));
  }

  // The token: given, or generated into a private temporary directory.
  std::string token_file = absl::GetFlag(FLAGS_token_file);
  std::string temp_dir;
  if (token_file.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "pscluster-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return psc::daemon::ReportFailure(kProgram,
                                        absl::InternalError("cannot create a temporary directory"));
    }
    temp_dir = pattern;
    auto token = psc::cluster::GenerateAuthToken();
    if (!token.ok()) return psc::daemon::ReportFailure(kProgram, token.status());
    token_file = temp_dir + "/token";
    std::ofstream(token_file) << *token << "\n";
    chmod(token_file.c_str(), 0600);
  } else if (auto t = psc::cluster::LoadAuthToken(token_file); !t.ok()) {
    return psc::daemon::ReportFailure(kProgram, t.status());
  }

  psc::launcher::RunOptions options;
  options.bin_dir = OwnDirectory();
  options.daemon_flags = {"--auth_token_file=" + token_file};
  // --data_channel (a daemon flag) applies to every task.
  if (!absl::GetFlag(FLAGS_data_channel)) options.daemon_flags.push_back("--data_channel=false");
  // The workers share this host's cores unless told otherwise.
  if (!psc::launcher::LastFlagValue(chief_flags, "intra_op_threads").has_value()) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const int threads = psc::launcher::SharedIntraOpThreads(cores, launch.num_workers);
    chief_flags.push_back(absl::StrCat("--intra_op_threads=", threads));
    std::printf(
        "[launcher] %d workers share %d cores: --intra_op_threads=%d each (give "
        "--intra_op_threads to choose)\n",
        launch.num_workers, cores, threads);
    std::fflush(stdout);
  }
  options.chief_flags = chief_flags;
  options.stop_grace = absl::GetFlag(FLAGS_stop_grace);
  options.restart_failed = absl::GetFlag(FLAGS_restart_failed);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.evaluator_grace = absl::GetFlag(FLAGS_evaluator_grace);
  // The job (flags, model, data) is checked before any task starts: a bad
  // one is the chief's exit 2 and its message, with nothing to stop.
  int code = psc::launcher::CheckJob(*plan, options);
  if (code == 0) code = psc::launcher::RunLocalCluster(*plan, options);
  if (!temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
  return code;
}
