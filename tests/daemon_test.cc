// Integration: each daemon's command-line contract (DESIGN.md "Contracts"):
// --dry_run, TF_CONFIG errors (exit 2, one line naming the field), role
// checks, --help, ports in use, the loopback rule, and graceful shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/rpc/channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/free_port.h"
#include "nlohmann/json.hpp"
#include "proto/worker.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Role {
  const char* binary;
  const char* type;
};
const Role kRoles[] = {{"ps_server", "ps"}, {"worker", "worker"}, {"chief", "chief"}};
void PrintTo(const Role& role, std::ostream* os) { *os << role.binary; }

// The TF_CONFIG Kubeflow's TFJob operator injects.
std::string KubeflowTfConfig(const std::string& type, int index) {
  nlohmann::json j = {
      {"cluster",
       {{"chief", {"mnist-chief-0.default.svc:2222"}},
        {"ps", {"mnist-ps-0.default.svc:2222", "mnist-ps-1.default.svc:2222"}},
        {"worker", {"mnist-worker-0.default.svc:2222", "mnist-worker-1.default.svc:2222"}}}},
      {"task", {{"type", type}, {"index", index}}},
      {"environment", "cloud"}};
  return j.dump();
}

absl::StatusOr<RunResult> RunDaemon(const std::string& binary, const std::string& tf_config,
                                    std::vector<std::string> flags) {
  std::vector<std::string> argv = {BinPath(binary)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::map<std::string, std::string> env;
  if (!tf_config.empty()) env["TF_CONFIG"] = tf_config;
  return RunProgram(argv, env, absl::Seconds(60));
}

class DaemonTest : public ::testing::TestWithParam<Role> {};

TEST_P(DaemonTest, DryRunPrintsTheKubeflowTaskAsJson) {
  const Role& role = GetParam();
  const int index = std::string(role.type) == "chief" ? 0 : 1;
  auto r = RunDaemon(role.binary, KubeflowTfConfig(role.type, index), {"--dry_run"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  auto j = nlohmann::json::parse(r->out);
  EXPECT_EQ(j["task_type"], role.type);
  EXPECT_EQ(j["task_index"], index);
  EXPECT_EQ(j["address"], absl::StrCat("mnist-", role.type, "-", index, ".default.svc:2222"));
  EXPECT_EQ(j["cluster"]["ps"].size(), 2u);
  EXPECT_EQ(j["cluster"]["worker"][1], "mnist-worker-1.default.svc:2222");
  EXPECT_EQ(r->out.back(), '\n');
  EXPECT_EQ(std::count(r->out.begin(), r->out.end(), '\n'), 1) << "one JSON object, one line";
}

TEST_P(DaemonTest, DryRunAlsoReadsTheFlagAndAFile) {
  const Role& role = GetParam();
  const std::string dir = MakeTempDir("dryrun");
  WriteFile(dir + "/tf.json", KubeflowTfConfig(role.type, 0));
  auto r = RunDaemon(role.binary, "", {"--dry_run", "--tf_config=@" + dir + "/tf.json"});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_EQ(nlohmann::json::parse(r->out)["task_type"], role.type);
  // --tf_config wins over the environment.
  r = RunDaemon(role.binary, "not json",
                {"--dry_run", "--tf_config=" + KubeflowTfConfig(role.type, 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
}

TEST_P(DaemonTest, BadConfigExitsTwoWithOneLineNamingTheField) {
  const Role& role = GetParam();
  struct Case {
    std::string tf_config;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "TF_CONFIG is not set"},
      {"{", "TF_CONFIG: not valid JSON"},
      {absl::StrCat(R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"], "chief": ["c:1"]},
                       "task": {"type": ")",
                    role.type, R"(", "index": 3}})"),
       // A worker beyond the list would join the chief's job
       // (docs/guide/membership.md), given the address it is reached at.
       std::string(role.type) == "worker"
           ? std::string("TF_CONFIG: task.index 3 is beyond the cluster's \"worker\" list: to "
                         "join the running job of the chief at c:1, give "
                         "--advertise_address=HOST:PORT")
           : absl::StrCat("TF_CONFIG: task.index 3 out of range: cluster has 1 \"", role.type,
                          "\" task")},
      {R"({"cluster": {"ps": ["a:99999"]}, "task": {"type": "ps"}})",
       "TF_CONFIG: cluster.\"ps\"[0] \"a:99999\": port 99999 out of range 1-65535"},
  };
  for (const Case& c : cases) {
    auto r = RunDaemon(role.binary, c.tf_config, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << c.tf_config;
    EXPECT_THAT(r->err, HasSubstr(c.message));
    EXPECT_EQ(std::count(r->err.begin(), r->err.end(), '\n'), 1) << r->err;
    EXPECT_EQ(r->out, "");
  }
}

TEST_P(DaemonTest, RefusesATaskOfAnotherRole) {
  const Role& role = GetParam();
  const std::string other = std::string(role.type) == "worker" ? "ps" : "worker";
  auto r = RunDaemon(role.binary, KubeflowTfConfig(other, 0), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr(absl::StrCat("TF_CONFIG: task.type is \"", other, "\" but ",
                                             role.binary, " runs \"", role.type, "\" tasks")));
}

// A chief of the parameter_server strategy needs a ps (a worker without
// one is a multi_worker_mirrored worker: collective_semantics_test and
// training_test run those).
TEST(TrainingClusterTest, TheParameterServerChiefNeedsAPs) {
  for (const char* binary : {"chief"}) {
    const std::string type = std::string(binary) == "worker" ? "worker" : "chief";
    auto r =
        RunDaemon(binary,
                  absl::StrCat(R"({"cluster": {"worker": ["127.0.0.1:1"], "chief": ["127.0.0.1:2"]},
                                       "task": {"type": ")",
                               type, R"("}})"),
                  {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << binary;
    EXPECT_THAT(r->err,
                HasSubstr("TF_CONFIG: cluster has no \"ps\" task; training needs at least one"));
  }
}

TEST_P(DaemonTest, HelpListsOurFlags) {
  auto r = RunDaemon(GetParam().binary, "", {"--help"});
  ASSERT_TRUE(r.ok());
  const std::string help = r->out + r->err;
  for (const char* flag : {"--tf_config", "--dry_run", "--bind", "--auth_token_file", "--tls_cert",
                           "--allow_insecure", "--shutdown_grace"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
  EXPECT_THAT(help, HasSubstr(GetParam().binary));
}

TEST_P(DaemonTest, RefusesNonLoopbackWithoutATokenAndBadTokenFiles) {
  const Role& role = GetParam();
  ClusterSpec spec(1, 1);
  const int index = 0;
  const std::string tf = spec.TfConfig(*cluster::ParseTaskType(role.type), index);
  // Nothing is bound: the daemon refuses before listening.
  auto r = RunDaemon(role.binary, tf, {"--bind=0.0.0.0"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("refusing to listen on non-loopback address \"0.0.0.0\" without "
                                "a cluster token"));
  r = RunDaemon(role.binary, tf, {"--auth_token_file=/nonexistent/token"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("--auth_token_file=/nonexistent/token: cannot read"));
  r = RunDaemon(role.binary, tf, {"--tls_cert=/tmp/x.pem"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("TLS needs all three of --tls_cert, --tls_key and --tls_ca"));
  r = RunDaemon(role.binary, tf, {"--shutdown_grace=-1s"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("--shutdown_grace must not be negative"));
  r = RunDaemon(role.binary, tf, {"--bind=bad host"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2");
  EXPECT_THAT(r->err, HasSubstr("--bind=bad host"));
}

// A socket listening on a free loopback port (its number into *port), so
// that a daemon given that port finds it in use; -1 on failure.
int ListenOnAFreePort(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST_P(DaemonTest, PortInUseIsAClearError) {
  const Role& role = GetParam();
  int port = 0;
  const int fd = ListenOnAFreePort(&port);
  ASSERT_GE(fd, 0);
  const std::string busy = absl::StrCat("127.0.0.1:", port);
  nlohmann::json j = {{"cluster", {{"chief", {busy}}, {"ps", {busy}}, {"worker", {busy}}}},
                      {"task", {{"type", role.type}, {"index", 0}}}};
  // Distinct addresses are required, so give the other tasks their own ports.
  for (const char* other : {"chief", "ps", "worker"}) {
    if (std::string(other) != role.type)
      j["cluster"][other] = {absl::StrCat("127.0.0.1:", PickFreePort())};
  }
  std::vector<std::string> flags;
  if (std::string(role.type) == "chief") flags.push_back("--startup_timeout=1s");
  auto r = RunDaemon(role.binary, j.dump(), flags);
  close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 1");
  EXPECT_THAT(r->err, HasSubstr("cannot listen on " + busy + ": Address already in use"));
  // One line of ours, not gRPC's internal dump first.
  EXPECT_THAT(r->err, Not(HasSubstr("chttp2_server"))) << r->err;
}

// A metrics port in use names the flag and the OS's reason, not civetweb's
// "null context when constructing CivetServer"; every role has the flag.
TEST_P(DaemonTest, AMetricsPortInUseNamesTheFlagAndTheErrno) {
  const Role& role = GetParam();
  int busy = 0;
  const int fd = ListenOnAFreePort(&busy);
  ASSERT_GE(fd, 0);
  nlohmann::json j = {{"cluster",
                       {{"ps", {absl::StrCat("127.0.0.1:", PickFreePort())}},
                        {"worker", {absl::StrCat("127.0.0.1:", PickFreePort())}},
                        {"chief", {absl::StrCat("127.0.0.1:", PickFreePort())}}}},
                      {"task", {{"type", role.type}, {"index", 0}}}};
  auto r = RunDaemon(role.binary, j.dump(), {absl::StrCat("--metrics_port=", busy)});
  close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 1");
  EXPECT_THAT(r->err,
              HasSubstr(absl::StrCat("--metrics_port=", busy, ": cannot listen on 127.0.0.1:", busy,
                                     ": Address already in use (errno 98)")));
  EXPECT_THAT(r->err, Not(HasSubstr("CivetServer")));
}

INSTANTIATE_TEST_SUITE_P(Daemons, DaemonTest, ::testing::ValuesIn(kRoles),
                         [](const auto& info) { return std::string(info.param.type); });

class GracefulShutdownTest : public ::testing::TestWithParam<int> {};

TEST_P(GracefulShutdownTest, ServersExitZeroOnSignal) {
  const int sig = GetParam();
  ClusterSpec spec(1, 1);
  const std::string dir = MakeTempDir("signal");
  for (cluster::TaskType type : {cluster::TaskType::kPs, cluster::TaskType::kWorker}) {
    auto d = Daemon::Start(type == cluster::TaskType::kPs ? "ps_server" : "worker",
                           spec.TfConfig(type, 0), {}, dir);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(WaitForServing(spec.Address(type, 0), {}, absl::Seconds(30)).ok()) << (*d)->Log();
    (*d)->process().Signal(sig);
    auto exit = (*d)->process().Wait(absl::Seconds(30));
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->ToString(), "exit 0") << (*d)->Log();
    EXPECT_THAT((*d)->Log(),
                HasSubstr(sig == SIGTERM ? "shutting down (SIGTERM)" : "shutting down (SIGINT)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, GracefulShutdownTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) {
                           return info.param == SIGTERM ? "SIGTERM" : "SIGINT";
                         });

TEST(ShutdownRpcTest, WorkerExitsZeroOnShutdown) {
  ClusterSpec spec(1, 1);
  const std::string dir = MakeTempDir("shutdown");
  auto d = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 0), {}, dir);
  ASSERT_TRUE(d.ok());
  const std::string address = spec.Address(cluster::TaskType::kWorker, 0);
  ASSERT_TRUE(WaitForServing(address, {}, absl::Seconds(30)).ok());
  grpc::ClientContext context;
  rpc::PrepareContext(&context, {}, absl::Seconds(10));
  proto::ShutdownRequest request;
  request.set_reason("test over");
  proto::ShutdownResponse response;
  grpc::Status s = proto::Worker::NewStub(rpc::CreateChannel(address, {}))
                       ->Shutdown(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto exit = (*d)->process().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->ToString(), "exit 0");
  EXPECT_THAT((*d)->Log(), HasSubstr("test over"));
}

// The heartbeat flags: a negative duration is a flag error, before anything
// listens.
TEST(HeartbeatFlagsTest, NegativeDurationsExitTwoNamingTheFlag) {
  ClusterSpec spec(1, 1);
  auto worker = RunDaemon("worker", spec.TfConfig(cluster::TaskType::kWorker, 0),
                          {"--heartbeat_interval=-1s"});
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ(worker->exit.ToString(), "exit 2");
  EXPECT_THAT(worker->err, HasSubstr("--heartbeat_interval must not be negative"));
  auto chief =
      RunDaemon("chief", spec.TfConfig(cluster::TaskType::kChief, 0), {"--heartbeat_timeout=-5s"});
  ASSERT_TRUE(chief.ok());
  EXPECT_EQ(chief->exit.ToString(), "exit 2");
  EXPECT_THAT(chief->err, HasSubstr("--heartbeat_timeout must not be negative"));
  auto junk =
      RunDaemon("chief", spec.TfConfig(cluster::TaskType::kChief, 0), {"--heartbeat_timeout=soon"});
  ASSERT_TRUE(junk.ok());
  EXPECT_NE(junk->exit.ToString(), "exit 0");
  EXPECT_THAT(junk->err, HasSubstr("heartbeat_timeout"));
}

// Joining and leaving (docs/guide/membership.md): a bad value of a new flag
// exits 2 naming it, before anything listens or joins.
TEST(JoinFlagsTest, BadValuesExitTwoNamingTheFlag) {
  ClusterSpec spec(1, 2);
  struct Case {
    std::string binary;
    std::string tf_config;
    std::vector<std::string> flags;
    std::string message;
  };
  const std::string worker = spec.TfConfig(cluster::TaskType::kWorker, 0);
  const std::string chief = spec.TfConfig(cluster::TaskType::kChief, 0);
  const std::vector<Case> cases = {
      {"worker", "", {"--join=127.0.0.1:1"}, "--join needs --advertise_address=HOST:PORT"},
      {"worker",
       "",
       {"--join=127.0.0.1:1", "--advertise_address=0.0.0.0:5000"},
       "--advertise_address=0.0.0.0:5000: give the address others reach this worker at"},
      {"worker",
       "",
       {"--join=127.0.0.1:1", "--advertise_address=127.0.0.1:5000", "--heartbeat_interval=0"},
       "--join needs heartbeats"},
      {"worker", worker, {"--drain_timeout=-1s"}, "--drain_timeout must not be negative"},
      {"chief", chief, {"--max_workers=-1"}, "--max_workers=-1: must be in [0, 4096]"},
      {"chief", chief, {"--max_workers=5000"}, "--max_workers=5000: must be in [0, 4096]"},
      {"chief", chief, {"--max_workers=1"}, "--max_workers=1 is fewer than the 2 workers"},
      {"chief",
       chief,
       {"--max_workers=3", "--strategy=multi_worker_mirrored"},
       "--strategy=multi_worker_mirrored trains on TF_CONFIG's workers only"},
  };
  for (const Case& c : cases) {
    auto r = RunDaemon(c.binary, c.tf_config, c.flags);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << absl::StrJoin(c.flags, " ") << ": " << r->err;
    EXPECT_THAT(r->err, HasSubstr(c.message)) << absl::StrJoin(c.flags, " ");
  }
  // pscluster join needs the chief and the token.
  auto join =
      RunProgram({BinPath("pscluster"), "join", "--chief=127.0.0.1:1"}, {}, absl::Seconds(30));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(join->exit.ToString(), "exit 2");
  EXPECT_THAT(join->err, HasSubstr("join needs --chief=HOST:PORT"));
}

TEST(WorkerStandaloneTest, BadJobFlagsExitTwoBeforeTraining) {
  struct Case {
    std::string flag, message;
  };
  const std::vector<Case> cases = {
      {"--model=resnet",
       "--model=resnet: unknown model \"resnet\"; expected seed_cnn, mlp, or a Keras model file"},
      {"--batch_size=0", "--batch_size=0: must be in [1, 65536]"},
      {"--mode=bulk", "--mode=bulk: expected sync, async or ssp"},
      {"--data_dir=/nonexistent", "--data_dir=/nonexistent: not a readable directory"},
      {"--optimizer=lion", "unknown optimizer \"lion\"; expected sgd, momentum, adam, adamw"},
      {"--learning_rate=-1", "--learning_rate=-1: must be finite and > 0"},
      {"--conv_algorithm=fast",
       "--conv_algorithm=fast: unknown convolution algorithm \"fast\"; expected auto or direct"},
      {"--epochs=0", "--epochs=0: must be >= 1"},
      {"--intra_op_threads=-2", "--intra_op_threads=-2"},
      {"--max_train_examples=10", "fewer than one batch of 128"},
      // Issue 16's flags.
      {"--data=/nonexistent.npz", "--data=/nonexistent.npz: not a readable file"},
      {"--validation_split=1", "--validation_split=1: must be in [0, 1)"},
      {"--rescale=1/255", "apply to --data=FILE.npz"},
      {"--model=/nonexistent/m.keras", "/nonexistent/m.keras"},
      {"--model=/nonexistent/m.h5", "or a Keras model file (.keras or .json)"},
      {"--export=/tmp/m.h5", "--export=/tmp/m.h5: must end in .keras"},
      {"--export_weights=/tmp/m.h5", "--export_weights=/tmp/m.h5: must end in .weights.h5"},
  };
  for (const Case& c : cases) {
    auto r = RunProgram({BinPath("worker"), "--standalone", c.flag}, {}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << c.flag;
    EXPECT_THAT(r->err, HasSubstr(c.message)) << c.flag;
    EXPECT_THAT(r->out, ::testing::Not(HasSubstr("Epoch"))) << c.flag;
  }
}

TEST(WorkerStandaloneTest, TrainsAndWritesTheResultFile) {
  const std::string dir = MakeTempDir("standalone");
  auto r = RunProgram(
      {BinPath("worker"), "--standalone", "--model=mlp", "--optimizer=momentum", "--epochs=2",
       "--steps_per_epoch=10", "--batch_size=64", "--max_train_examples=6400",
       "--intra_op_threads=1", "--metrics_out=" + dir + "/result.json"},
      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_THAT(r->out, HasSubstr("Epoch 2/2 10/10"));
  EXPECT_THAT(r->out, HasSubstr("val_accuracy: "));
  auto j = nlohmann::json::parse(ReadFile(dir + "/result.json"));
  EXPECT_EQ(j["mode"], "standalone");
  EXPECT_EQ(j["epochs"].size(), 2u);
  EXPECT_LT(j["epochs"][1]["loss"].get<double>(), j["epochs"][0]["loss"].get<double>());
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["steps"], 20);
  EXPECT_EQ(j["final_variables_sha256"].get<std::string>().size(), 64u);
}

TEST(WorkerTest, ListDevicesShowsTheCpu) {
  auto r = RunProgram({BinPath("worker"), "--list_devices"}, {}, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_THAT(r->out, HasSubstr("/job:worker/replica:0/task:0/device:CPU:0"));
  // The GPU plugin loaded, with its libraries' versions, or why not.
  EXPECT_THAT(r->out,
              ::testing::AnyOf(HasSubstr("GPU libraries:"), HasSubstr("GPU plugin: not loaded (")));
}

}  // namespace
}  // namespace testing
}  // namespace psc
