// pscluster: the local launcher. `pscluster launch` starts a whole cluster on
// this machine on free loopback ports with a fresh token, and returns the
// chief's exit status.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/cluster/auth_token.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/job/compile_config.h"
#include "common/job/job_model.h"
#include "common/rpc/security.h"
#include "common/tfrecord/record_reader.h"
#include "launcher/data_commands.h"
#include "launcher/experiment_flags.h"
#include "launcher/flag_args.h"
#include "launcher/free_port.h"
#include "launcher/health_check.h"
#include "launcher/launch_plan.h"
#include "launcher/local_cluster.h"
#include "launcher/model_commands.h"

ABSL_FLAG(int, ps, 1,
          "launch: number of ps tasks (parameter_server; none with multi_worker_mirrored, one "
          "with central_storage).");
ABSL_FLAG(std::string, strategy, "parameter_server",
          "launch: the tf.distribute strategy. parameter_server: --ps servers, --workers workers "
          "and the chief. multi_worker_mirrored: --workers workers all-reducing, no ps, and the "
          "chief. mirrored: one `worker --standalone`, one replica per local device. "
          "central_storage: one ps and one worker with a replica per local device, and the "
          "chief. Passed to the chief (and the standalone worker) as --strategy.");
ABSL_FLAG(int, local_replicas, 0,
          "launch: N CPU replicas on each worker (the worker's --device=cpu "
          "--virtual_devices=N), as TensorFlow's logical CPU devices; 0 = the worker's own "
          "choice: one replica per GPU, or the CPU alone.");
ABSL_FLAG(int, workers, 2, "launch: number of worker tasks.");
ABSL_FLAG(std::string, straggler, "",
          "launch: INDEX:FACTOR makes worker INDEX FACTOR times slower (its "
          "--straggler_factor), an experiment knob for sync/async studies, e.g. 2:3.");
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
ABSL_FLAG(bool, metrics, false,
          "launch: every task serves Prometheus metrics (its --metrics_port) on a free "
          "127.0.0.1 port; the launcher prints each task's /metrics URL.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(3),
          "health: how long to wait for the daemon's answer (a daemon still starting may "
          "take it all).");
ABSL_FLAG(std::string, chief, "",
          "join: the HOST:PORT of the running chief whose job the new worker joins (the chief "
          "of a `pscluster launch` prints it when its --max_workers leaves seats).");
ABSL_FLAG(absl::Duration, evaluator_grace, absl::Seconds(120),
          "launch: after the chief exits 0, how long the evaluator may take to evaluate the "
          "final checkpoint before it is stopped.");

ABSL_FLAG(std::string, model, "",
          "describe / export: the model (seed_cnn, mlp, FILE.keras or FILE.json); with describe "
          "it may be given as the argument instead.");
ABSL_FLAG(std::string, out, "", "export: the file to write, PATH.keras or PATH.weights.h5.");
ABSL_FLAG(std::string, data, "", "predict: the .npz (or .npy) holding the examples.");
ABSL_FLAG(std::string, x, "x_test", "predict: the array of examples in --data's .npz.");
ABSL_FLAG(int64_t, step, -1,
          "export: the checkpoint step to export; -1 = the newest complete one.");
ABSL_FLAG(int, records, 3, "data inspect: how many records of the first file to print.");
ABSL_FLAG(std::string, compression, "auto",
          "data inspect: the files' compression: auto (seen from each file's first bytes), "
          "none, gzip or zlib; data convert: what to write (auto: none).");
ABSL_FLAG(int, shards, 1, "data convert: the files per split.");
ABSL_FLAG(std::string, spec, "", "data dump: the feature spec (JSON) to read the records through.");
ABSL_FLAG(bool, skip_corrupt_records, false,
          "data dump: skip and count a damaged record, or one that does not fit the spec.");
ABSL_FLAG(std::string, format, "tfrecord", "data convert: tfrecord or csv.");

namespace {

constexpr char kProgram[] = "pscluster";
constexpr char kUsage[] =
    "runs a pscluster job on this machine.\n"
    "Usage: pscluster launch [--strategy=S] [--ps=N] [--workers=N] [--token_file=F]\n"
    "                        [--restart_failed [--max_restarts=N]] [--metrics]\n"
    "                        [--evaluator [--evaluator_grace=D]] [--dry_run]\n"
    "                        [--data_channel=false] -- [chief flags]\n"
    "Starts N ps_server and N worker processes, with --evaluator the evaluator, and the chief\n"
    "on free 127.0.0.1 ports, each with its TF_CONFIG and a generated token; prefixes their\n"
    "output with the task name; with --restart_failed, restarts a ps, worker or evaluator that\n"
    "fails while the chief runs; stops all of them when the chief exits (after the evaluator\n"
    "finished, up to --evaluator_grace) or on Ctrl-C; exits with the chief's status.\n"
    "The evaluator takes the chief flags too (it needs --checkpoint_dir; it writes\n"
    "TensorBoard scalars to <logdir>/eval and takes --eval_out and --poll_interval).\n"
    "--dry_run prints the plan (each task's command line and TF_CONFIG) and checks the job,\n"
    "starting nothing; --data_channel=false moves every tensor over gRPC.\n"
    "\n"
    "Usage: pscluster join --chief=HOST:PORT --token_file=F [-- worker flags]\n"
    "Adds a worker to a running job of this machine (the chief takes --max_workers above\n"
    "its workers): runs `worker --join` on a free 127.0.0.1 port in the foreground. Ctrl-C\n"
    "or SIGTERM removes it again: it finishes its unit, leaves the job drained, exits 0.\n"
    "\n"
    "Usage: pscluster describe MODEL [--ps=N]\n"
    "Prints MODEL (seed_cnn, mlp, FILE.keras, FILE.json) as Keras's summary() does, and where\n"
    "each variable would be placed over N parameter servers.\n"
    "\n"
    "Usage: pscluster export CHECKPOINT_DIR --model=MODEL --out=PATH.keras|PATH.weights.h5\n"
    "                        [--step=N]\n"
    "Writes the newest complete checkpoint (or step N) as Keras files.\n"
    "\n"
    "Usage: pscluster predict --model=FILE.keras --data=F.npz [--x=x_test] --out=P.npy\n"
    "Writes the model's outputs (as Keras's predict) on the examples, as they are, to P.npy.\n"
    "\n"
    "Usage: pscluster data inspect GLOB [--records=3] [--compression=auto]\n"
    "Prints how many TFRecord files GLOB matches, the features of the first file's first\n"
    "records (tf.train.Example: each feature's kind, length and first values) and a feature\n"
    "spec to start from.\n"
    "\n"
    "Usage: pscluster data convert F.npz OUT_DIR [--shards=1] [--compression=none]\n"
    "                              [--format=tfrecord|csv]\n"
    "Writes the archive's splits as data files in OUT_DIR, in order, and their feature spec\n"
    "(OUT_DIR/spec.json), for --data=tfrecord:train=OUT_DIR/train-*,...,spec=OUT_DIR/spec.json.\n"
    "\n"
    "Usage: pscluster data dump GLOB --spec=FILE --out=DIR [--format=tfrecord|csv]\n"
    "                           [--compression=auto] [--skip_corrupt_records]\n"
    "Reads every record through the spec as a job does and writes DIR/<input>.npy,\n"
    "DIR/label.npy (and DIR/weight.npy).\n"
    "\n"
    "Usage: pscluster plot RESULT.json [MORE.json ...] --out=FILE.png [--label=L ...]\n"
    "Draws validation accuracy against training time and examples seen, training loss,\n"
    "throughput and the staleness histogram of one or more runs' result files\n"
    "(python3 -m pscluster.plot, with Debian's python3-matplotlib).\n"
    "\n"
    "Usage: pscluster health HOST:PORT [--timeout=3s] [--auth_token_file=F]\n"
    "                        [--tls_ca=F --tls_cert=F --tls_key=F]\n"
    "Asks a daemon's gRPC health service whether it serves: exit 0 and \"SERVING\", or 1\n"
    "and why (the probe of docker-compose's healthchecks).";

// --help lists the flags defined in this file, not the daemons' linked in.
bool IsLauncherFlagFile(absl::string_view file) { return absl::EndsWith(file, "launcher/main.cc"); }

// pscluster health HOST:PORT.
int Health(const std::vector<char*>& args) {
  if (args.size() != 3) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("usage: pscluster health HOST:PORT [--timeout=3s] "
                                             "[--auth_token_file=F] [--tls_ca=F --tls_cert=F "
                                             "--tls_key=F]"));
  }
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (timeout <= absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(kProgram,
                                      absl::InvalidArgumentError("--timeout must be positive"));
  }
  auto security = psc::rpc::LoadSecurityOptions(
      absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_tls_cert),
      absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca));
  if (!security.ok()) return psc::daemon::ReportFailure(kProgram, security.status());
  if (absl::Status s = psc::launcher::CheckHealth(args[2], *security, timeout); !s.ok()) {
    return psc::daemon::ReportFailure(kProgram, s);
  }
  std::printf("%s: SERVING\n", args[2]);
  return 0;
}

// pscluster describe MODEL.
int Describe(const std::vector<char*>& args) {
  std::string model = absl::GetFlag(FLAGS_model);
  if (args.size() == 3) model = args[2];
  if (args.size() > 3 || model.empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("usage: pscluster describe MODEL [--ps=N]"));
  }
  auto loaded = psc::launcher::LoadModel(model);
  if (!loaded.ok()) return psc::daemon::ReportFailure(kProgram, loaded.status());
  // The loss, where the compile config names one we run, says whether
  // the output is classes or a regression's values.
  absl::StatusOr<psc::job::CompileConfig> compiled =
      psc::job::ReadCompileConfig(loaded->config_json, loaded->model, model);
  auto text = psc::launcher::DescribeModel(loaded->model, absl::GetFlag(FLAGS_ps),
                                           compiled.ok() ? compiled->loss : "");
  if (!text.ok()) return psc::daemon::ReportFailure(kProgram, text.status());
  std::printf("%s", text->c_str());
  return 0;
}

// pscluster export CHECKPOINT_DIR --model=M --out=F.
int Export(const std::vector<char*>& args) {
  if (args.size() != 3 || absl::GetFlag(FLAGS_model).empty() || absl::GetFlag(FLAGS_out).empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("usage: pscluster export CHECKPOINT_DIR --model=MODEL "
                                             "--out=PATH.keras|PATH.weights.h5 [--step=N]"));
  }
  auto loaded = psc::launcher::LoadModel(absl::GetFlag(FLAGS_model));
  if (!loaded.ok()) return psc::daemon::ReportFailure(kProgram, loaded.status());
  auto step = psc::launcher::ExportCheckpoint(args[2], absl::GetFlag(FLAGS_step), *loaded,
                                              absl::GetFlag(FLAGS_out));
  if (!step.ok()) {
    // A missing checkpoint or one of another model is the caller's input.
    const absl::StatusCode code = step.status().code();
    return psc::daemon::ReportFailure(
        kProgram,
        code == absl::StatusCode::kNotFound || code == absl::StatusCode::kFailedPrecondition
            ? absl::InvalidArgumentError(step.status().message())
            : step.status());
  }
  std::printf("exported step %lld of %s to %s\n", static_cast<long long>(*step), args[2],
              absl::GetFlag(FLAGS_out).c_str());
  return 0;
}

// The directory holding this executable; the daemons are beside it.
std::string OwnDirectory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// pscluster predict --model=M.keras --data=F --out=P.npy.
int Predict(const std::vector<char*>& args) {
  const std::string model = absl::GetFlag(FLAGS_model), out = absl::GetFlag(FLAGS_out);
  if (args.size() != 2 || model.empty() || out.empty() || absl::GetFlag(FLAGS_data).empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("usage: pscluster predict --model=FILE.keras "
                                             "--data=F.npz [--x=x_test] --out=P.npy"));
  }
  auto loaded = psc::launcher::LoadModel(
      model, psc::job::NumpyInputShapes(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_x)));
  if (!loaded.ok()) return psc::daemon::ReportFailure(kProgram, loaded.status());
  auto n = psc::launcher::PredictArray(*loaded, model, absl::GetFlag(FLAGS_data),
                                       absl::GetFlag(FLAGS_x), out);
  if (!n.ok()) {
    const absl::StatusCode code = n.status().code();
    return psc::daemon::ReportFailure(
        kProgram, code == absl::StatusCode::kNotFound || code == absl::StatusCode::kDataLoss
                      ? absl::InvalidArgumentError(n.status().message())
                      : n.status());
  }
  std::printf("predicted %lld examples to %s\n", static_cast<long long>(*n), out.c_str());
  return 0;
}

// --strategy=mirrored: one `worker --standalone` in this process's place,
// one replica per local device and no servers (as tf.distribute's
// MirroredStrategy runs in one process).
int RunMirrored(const std::vector<std::string>& job_flags,
                const std::vector<std::string>& worker_flags, bool evaluator) {
  if (evaluator) {
    return psc::daemon::ReportFailure(
        kProgram,
        absl::InvalidArgumentError("--strategy=mirrored evaluates in the worker after every epoch; "
                                   "--evaluator belongs to the cluster strategies"));
  }
  std::vector<std::string> argv = {OwnDirectory() + "/worker", "--standalone"};
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  argv.insert(argv.end(), job_flags.begin(), job_flags.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  execv(raw[0], raw.data());
  return psc::daemon::ReportFailure(
      kProgram,
      absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(errno))));
}

}  // namespace

// pscluster plot ...: the Python module, with this repository's python/
// (PSCLUSTER_PYTHON_DIR overrides) on its path, under $PSC_PYTHON, else
// Debian's /usr/bin/python3 (where python3-matplotlib is), else the PATH's
// python3. Its flags are its own.
int Plot(int argc, char** argv) {
  const char* given = std::getenv("PSCLUSTER_PYTHON_DIR");
  std::string dir = given != nullptr && *given != '\0' ? given : PSC_PYTHON_DIR;
  if (!std::filesystem::exists(dir + "/pscluster/plot.py")) dir = OwnDirectory() + "/../python";
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = old != nullptr && *old != '\0' ? dir + ":" + old : dir;
  setenv("PYTHONPATH", path.c_str(), 1);
  const char* python = std::getenv("PSC_PYTHON");
  std::string interpreter = python != nullptr && *python != '\0'          ? python
                            : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                          : "python3";
  std::vector<std::string> argv_out = {interpreter, "-m", "pscluster.plot"};
  for (int i = 2; i < argc; ++i) argv_out.push_back(argv[i]);
  std::vector<char*> raw;
  for (std::string& a : argv_out) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  execvp(raw[0], raw.data());
  std::fprintf(stderr, "pscluster plot: cannot run python3: %s (install python3-matplotlib)\n",
               std::strerror(errno));
  return psc::daemon::kExitConfigError;
}

// pscluster data inspect GLOB; pscluster data convert F.npz OUT_DIR.
int Data(const std::vector<char*>& args) {
  const bool inspect = args.size() == 4 && std::string(args[2]) == "inspect";
  const bool convert = args.size() == 5 && std::string(args[2]) == "convert";
  const bool dump = args.size() == 4 && std::string(args[2]) == "dump" &&
                    !absl::GetFlag(FLAGS_spec).empty() && !absl::GetFlag(FLAGS_out).empty();
  if (!inspect && !convert && !dump) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "usage: pscluster data inspect GLOB [--records=3] [--compression=auto], "
                      "pscluster data convert F.npz OUT_DIR [--shards=1] "
                      "[--compression=none] [--format=tfrecord|csv], or pscluster data dump "
                      "GLOB --spec=FILE --out=DIR [--format=tfrecord|csv] [--compression=auto] "
                      "[--skip_corrupt_records]"));
  }
  auto compression = psc::tfrecord::ParseCompression(absl::GetFlag(FLAGS_compression));
  if (!compression.ok()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(absl::StrCat("--", compression.status().message())));
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "tfrecord" && format != "csv") {
    return psc::daemon::ReportFailure(
        kProgram,
        absl::InvalidArgumentError(absl::StrCat("--format=", format, ": want tfrecord or csv")));
  }
  if (dump) {
    auto text = psc::launcher::DumpRecords(
        args[3], absl::GetFlag(FLAGS_spec), absl::GetFlag(FLAGS_out), format == "csv", *compression,
        absl::GetFlag(FLAGS_skip_corrupt_records), psc::tfrecord::kDefaultMaxRecordBytes);
    if (!text.ok()) return psc::daemon::ReportFailure(kProgram, text.status());
    std::printf("%s", text->c_str());
    return 0;
  }
  auto text =
      inspect ? psc::launcher::InspectRecords(args[3], absl::GetFlag(FLAGS_records), *compression,
                                              psc::tfrecord::kDefaultMaxRecordBytes)
              : psc::launcher::ConvertNpz(args[3], args[4], absl::GetFlag(FLAGS_shards),
                                          compression->value_or(psc::tfrecord::Compression::kNone),
                                          format == "csv");
  if (!text.ok()) return psc::daemon::ReportFailure(kProgram, text.status());
  std::printf("%s", text->c_str());
  return 0;
}

// pscluster join: `worker --join` on a free loopback port, in this process.
int Join(const std::vector<char*>& args) {
  const std::string chief = absl::GetFlag(FLAGS_chief);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (chief.empty() || token_file.empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "join needs --chief=HOST:PORT (the running chief) and --token_file=F (the "
                      "cluster's token; `pscluster launch --token_file=F` sets it)"));
  }
  auto port = psc::launcher::PickFreeLoopbackPort();
  if (!port.ok()) return psc::daemon::ReportFailure(kProgram, port.status());
  std::vector<std::string> argv_out = {OwnDirectory() + "/worker", "--join=" + chief,
                                       absl::StrCat("--advertise_address=127.0.0.1:", *port),
                                       "--auth_token_file=" + token_file};
  for (size_t i = 2; i < args.size(); ++i) argv_out.push_back(args[i]);
  std::printf("[launcher] worker joining the job of %s at 127.0.0.1:%d (Ctrl-C drains it)\n",
              chief.c_str(), *port);
  std::fflush(stdout);
  std::vector<char*> raw;
  for (std::string& a : argv_out) raw.push_back(a.data());
  raw.push_back(nullptr);
  // The worker takes SIGTERM and SIGINT itself (it drains): unblock them.
  sigset_t all;
  sigemptyset(&all);
  sigaddset(&all, SIGTERM);
  sigaddset(&all, SIGINT);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  execv(raw[0], raw.data());
  return psc::daemon::ReportFailure(
      kProgram,
      absl::InternalError(absl::StrCat("cannot run ", raw[0], ": ", std::strerror(errno))));
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "plot") return Plot(argc, argv);
  // A closed stdout is an EPIPE the launcher sees (and stops the cluster
  // on), not a signal that kills it and orphans the tasks.
  signal(SIGPIPE, SIG_IGN);
  std::vector<char*> args = psc::daemon::InitDaemon(kUsage, argc, argv, IsLauncherFlagFile);
  const std::string command = args.size() < 2 ? "" : args[1];
  if (command == "health") return Health(args);
  if (command == "describe") return Describe(args);
  if (command == "export") return Export(args);
  if (command == "predict") return Predict(args);
  if (command == "join") return Join(args);
  if (command == "data") return Data(args);
  if (command != "launch") {
    std::fprintf(stderr, "pscluster: %s\n", kUsage);
    return psc::daemon::kExitConfigError;
  }
  if (!absl::GetFlag(FLAGS_chief).empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--chief is join's (pscluster join --chief=...)"));
  }
  if (!absl::GetFlag(FLAGS_model).empty() || !absl::GetFlag(FLAGS_out).empty() ||
      absl::GetFlag(FLAGS_step) != -1 || !absl::GetFlag(FLAGS_data).empty()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--model, --out, --step and --data are describe's, "
                                             "export's and predict's; a job's go after --"));
  }
  // The daemons' own flags are linked into this binary too; the launcher
  // sets them for its tasks itself, so one given here would be dropped.
  for (const auto& [name, instead] : std::vector<std::pair<const char*, const char*>>{
           {"tf_config", "the launcher writes every task's TF_CONFIG"},
           {"bind", "the tasks listen on 127.0.0.1"},
           {"allow_insecure", "the tasks listen on 127.0.0.1 with a token"},
           {"auth_token_file", "use --token_file"},
           {"tls_cert", "TLS is for daemons on other hosts; run them by hand"},
           {"tls_key", "TLS is for daemons on other hosts; run them by hand"},
           {"tls_ca", "TLS is for daemons on other hosts; run them by hand"},
           {"shutdown_grace", "use --stop_grace"},
           {"metrics_port", "use --metrics: every task gets a free port"}}) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag != nullptr && flag->CurrentValue() != flag->DefaultValue()) {
      return psc::daemon::ReportFailure(
          kProgram, absl::InvalidArgumentError(absl::StrCat(
                        "--", name, " is a daemon's flag that pscluster launch does not use (",
                        instead, "); a chief flag goes after --")));
    }
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

  // The strategy: the launcher's flag, or the chief's after -- (both must
  // agree), passed on to the chief.
  std::string strategy = absl::GetFlag(FLAGS_strategy);
  if (const auto given = psc::launcher::LastFlagValue(chief_flags, "strategy"); given.has_value()) {
    if (strategy != "parameter_server" && *given != strategy) {
      return psc::daemon::ReportFailure(
          kProgram, absl::InvalidArgumentError(absl::StrCat(
                        "--strategy=", strategy, " and, after --, --strategy=", *given)));
    }
    strategy = *given;
  } else {
    chief_flags.push_back("--strategy=" + strategy);
  }
  const bool ps_given = absl::GetFlag(FLAGS_ps) != 1;
  const int local_replicas = absl::GetFlag(FLAGS_local_replicas);
  if (local_replicas < 0) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--local_replicas must not be negative"));
  }
  psc::launcher::LaunchOptions launch;
  launch.num_ps = absl::GetFlag(FLAGS_ps);
  launch.num_workers = absl::GetFlag(FLAGS_workers);
  std::vector<std::string> worker_flags;
  if (local_replicas > 0) {
    worker_flags.push_back("--device=cpu");
    worker_flags.push_back(absl::StrCat("--virtual_devices=", local_replicas));
  }
  if (strategy == "multi_worker_mirrored") {
    launch.collective = true;
    if (!ps_given) launch.num_ps = 0;
  } else if (strategy == "central_storage" || strategy == "mirrored") {
    if (ps_given || absl::GetFlag(FLAGS_workers) != 2) {
      return psc::daemon::ReportFailure(
          kProgram,
          absl::InvalidArgumentError(absl::StrCat(
              "--strategy=", strategy, " is one machine's preset: ",
              strategy == "mirrored" ? "one worker and no servers" : "one ps and one worker",
              "; --ps and --workers belong to parameter_server and multi_worker_mirrored "
              "(--local_replicas sets the replicas)")));
    }
    launch.num_ps = 1;
    launch.num_workers = 1;
    if (strategy == "mirrored") {
      return RunMirrored(chief_flags, worker_flags, absl::GetFlag(FLAGS_evaluator));
    }
  } else if (strategy != "parameter_server") {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--strategy=", strategy,
                      ": expected parameter_server, multi_worker_mirrored, mirrored or "
                      "central_storage (TPUStrategy is not supported: no TPU)")));
  }
  launch.evaluator = evaluator;
  std::map<int, std::vector<std::string>> flags_of_worker;
  if (const std::string spec = absl::GetFlag(FLAGS_straggler); !spec.empty()) {
    auto straggler = psc::launcher::ParseStraggler(spec, launch.num_workers);
    if (!straggler.ok()) return psc::daemon::ReportFailure(kProgram, straggler.status());
    flags_of_worker[straggler->worker].push_back(
        absl::StrCat("--straggler_factor=", straggler->factor));
  }
  if (absl::Status s = psc::launcher::CheckReplicasToAggregate(chief_flags, launch.num_workers);
      !s.ok()) {
    return psc::daemon::ReportFailure(kProgram, s);
  }
  auto plan = psc::launcher::PlanLocalCluster(launch, psc::launcher::PickFreeLoopbackPorts);
  if (!plan.ok()) return psc::daemon::ReportFailure(kProgram, plan.status());
  if (absl::GetFlag(FLAGS_metrics)) {
    auto ports = psc::launcher::PickFreeLoopbackPorts(static_cast<int>(plan->size()));
    if (!ports.ok()) return psc::daemon::ReportFailure(kProgram, ports.status());
    for (size_t i = 0; i < plan->size(); ++i) {
      psc::launcher::PlannedTask& task = (*plan)[i];
      task.metrics_port = (*ports)[i];
      std::printf("[launcher] metrics of %s: http://127.0.0.1:%d/metrics\n", task.Name().c_str(),
                  task.metrics_port);
    }
    std::fflush(stdout);
  }
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
    // The loader speaks of the daemons' flag; this one is --token_file.
    return psc::daemon::ReportFailure(
        kProgram, absl::Status(t.status().code(),
                               absl::StrReplaceAll(t.status().message(),
                                                   {{"--auth_token_file", "--token_file"}})));
  }

  // Seats for workers that join (the chief's --max_workers): how to add one.
  if (const auto max = psc::launcher::LastFlagValue(chief_flags, "max_workers");
      max.has_value() && std::atoi(max->c_str()) > launch.num_workers) {
    for (const psc::launcher::PlannedTask& task : *plan) {
      if (!absl::StartsWith(task.Name(), "chief")) continue;
      std::printf(
          "[launcher] %d seat(s) for more workers; add one with: pscluster join --chief=%s "
          "--token_file=%s\n",
          std::atoi(max->c_str()) - launch.num_workers, task.address.c_str(), token_file.c_str());
      std::fflush(stdout);
    }
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
  options.worker_flags = worker_flags;
  options.flags_of_worker = flags_of_worker;
  options.stop_grace = absl::GetFlag(FLAGS_stop_grace);
  options.restart_failed = absl::GetFlag(FLAGS_restart_failed);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.evaluator_grace = absl::GetFlag(FLAGS_evaluator_grace);
  options.terminal = isatty(STDOUT_FILENO) == 1;
  // The job (flags, model, data) is checked before any task starts: a bad
  // one is the chief's exit 2 and its message, with nothing to stop.
  int code = 0;
  if (absl::GetFlag(FLAGS_dry_run)) {
    // The plan, and the chief's resolved job; nothing is started.
    for (const psc::launcher::PlannedTask& task : *plan) {
      std::printf(
          "%s at %s\n  command: %s\n  TF_CONFIG=%s\n", task.Name().c_str(), task.address.c_str(),
          absl::StrJoin(psc::launcher::TaskArgv(task, options, launch.evaluator), " ").c_str(),
          task.tf_config.c_str());
    }
    std::fflush(stdout);
    code = psc::launcher::CheckJob(*plan, options);
  } else {
    code = psc::launcher::CheckJob(*plan, options);
    if (code == 0) code = psc::launcher::RunLocalCluster(*plan, options);
  }
  if (!temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
  return code;
}
