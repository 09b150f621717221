// Fault tests: real processes, real kill -9.
#include <signal.h>

#include <filesystem>

#include "common/data/idx_reader.h"
#include "common/data/npz_test_util.h"
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

// Fashion-MNIST as an .npz with 2,560 training, 500 validation and 500 test
// images (np.savez's layout), written once per test process. The long fault
// tests need the cluster's steps around a kill, not the chief's validation
// of 5,000 examples every epoch and test of 10,000 at the end, which took
// three quarters of their time. Empty (after a failed assertion) when the
// dataset cannot be read.
const std::string& SmallFashionMnist() {
  static const std::string* const path = [] {
    const std::string dir = "/usr/share/datasets/fashion-mnist/";
    auto train_x = data::ReadIdxFile(dir + "train-images-idx3-ubyte.gz");
    auto train_y = data::ReadIdxFile(dir + "train-labels-idx1-ubyte.gz");
    auto test_x = data::ReadIdxFile(dir + "t10k-images-idx3-ubyte.gz");
    auto test_y = data::ReadIdxFile(dir + "t10k-labels-idx1-ubyte.gz");
    EXPECT_TRUE(train_x.ok() && train_y.ok() && test_x.ok() && test_y.ok());
    if (!train_x.ok() || !train_y.ok() || !test_x.ok() || !test_y.ok()) return new std::string();
    auto* out = new std::string(MakeTempDir("fault-data") + "/fashion-small.npz");
    std::vector<data::testing::NpzMember> members;
    data::testing::AddIdxSplit(*train_x, *train_y, 500, 2560, "train", &members);
    data::testing::AddIdxSplit(*train_x, *train_y, 0, 500, "val", &members);
    data::testing::AddIdxSplit(*test_x, *test_y, 0, 500, "test", &members);
    data::testing::WriteNpz(*out, members);
    return out;
  }();
  return *path;
}

std::string SmallData() { return "--data=" + SmallFashionMnist(); }

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("fault"); }

  std::unique_ptr<Daemon> StartTask(cluster::TaskType type, int index) {
    const char* binary = type == cluster::TaskType::kPs ? "ps_server" : "worker";
    auto d = Daemon::Start(binary, spec_.TfConfig(type, index), {}, dir_);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  absl::StatusOr<RunResult> CheckCluster(const std::string& timeout) {
    return RunProgram({BinPath("chief"), "--check_cluster", "--startup_timeout=" + timeout},
                      {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}},
                      absl::Seconds(60));
  }

  std::string dir_;
  ClusterSpec spec_{1, 2};
};

TEST_F(FaultTest, KilledWorkerIsReportedMissing) {
  auto ps = StartTask(cluster::TaskType::kPs, 0);
  auto w0 = StartTask(cluster::TaskType::kWorker, 0);
  auto w1 = StartTask(cluster::TaskType::kWorker, 1);
  auto before = CheckCluster("30s");
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->exit.ToString(), "exit 0") << before->err;

  w1->process().Signal(SIGKILL);
  auto killed = w1->process().Wait(absl::Seconds(30));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->term_signal, SIGKILL);

  auto after = CheckCluster("2s");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->exit.ToString(), "exit 1");
  EXPECT_THAT(after->err, HasSubstr("worker:1 at " + spec_.Address(cluster::TaskType::kWorker, 1)));
}

TEST_F(FaultTest, KilledServerRestartedOnItsAddressIsFoundAgain) {
  auto ps = StartTask(cluster::TaskType::kPs, 0);
  auto w0 = StartTask(cluster::TaskType::kWorker, 0);
  auto w1 = StartTask(cluster::TaskType::kWorker, 1);
  ASSERT_TRUE(WaitForServing(spec_.Address(cluster::TaskType::kPs, 0), {}, absl::Seconds(30)).ok());
  ps->process().Signal(SIGKILL);
  ASSERT_TRUE(ps->process().Wait(absl::Seconds(30)).ok());
  // The port is free again at once (no SO_REUSEPORT, but SO_REUSEADDR).
  auto restarted = StartTask(cluster::TaskType::kPs, 0);
  auto r = CheckCluster("30s");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err << restarted->Log();
}

}  // namespace
}  // namespace testing
}  // namespace psc

namespace psc {
namespace testing {
namespace {

// The chief dies (kill -9) after a checkpoint; started again, it restores
// every shard from the latest checkpoint and finishes the job with the same
// final variables as a run that never stopped.
TEST_F(FaultTest, KilledChiefResumesFromTheLatestCheckpoint) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::vector<std::string> job = {
      "--mode=sync",          "--model=mlp",          "--optimizer=momentum",
      "--epochs=2",           "--steps_per_epoch=10", "--max_train_examples=6400",
      "--intra_op_threads=1", "--eval_threads=1",     "--unit_steps=5"};
  auto run_chief = [&](const ClusterSpec& spec, std::vector<std::string> extra,
                       const std::string& log) {
    launcher::SubprocessOptions o;
    o.argv = {BinPath("chief"), "--startup_timeout=60s"};
    o.argv.insert(o.argv.end(), job.begin(), job.end());
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = {{"TF_CONFIG", spec.TfConfig(cluster::TaskType::kChief, 0)}};
    o.stdout_path = log;
    o.stderr_path = "=stdout";
    return launcher::Subprocess::Spawn(o);
  };
  auto start_servers = [&](const ClusterSpec& spec) {
    std::vector<std::unique_ptr<Daemon>> tasks;
    for (cluster::TaskType type :
         {cluster::TaskType::kPs, cluster::TaskType::kWorker, cluster::TaskType::kWorker}) {
      const int index = type == cluster::TaskType::kPs ? 0 : static_cast<int>(tasks.size()) - 1;
      auto d = Daemon::Start(type == cluster::TaskType::kPs ? "ps_server" : "worker",
                             spec.TfConfig(type, index), {}, dir_);
      EXPECT_TRUE(d.ok());
      if (d.ok()) tasks.push_back(*std::move(d));
    }
    return tasks;
  };

  // A run that never stops.
  std::string straight_sha;
  {
    ClusterSpec spec(1, 2);
    auto tasks = start_servers(spec);
    auto chief =
        run_chief(spec, {"--metrics_out=" + dir_ + "/straight.json"}, dir_ + "/straight.log");
    ASSERT_TRUE(chief.ok());
    auto exit = (*chief)->Wait(absl::Seconds(180));
    ASSERT_TRUE(exit.ok());
    ASSERT_EQ(exit->ToString(), "exit 0") << ReadFile(dir_ + "/straight.log");
    straight_sha =
        nlohmann::json::parse(ReadFile(dir_ + "/straight.json"))["final_variables_sha256"];
  }

  // The same job with checkpoints every 10 steps; the chief is killed once
  // the checkpoint of step 10 is complete.
  ClusterSpec spec(1, 2);
  auto tasks = start_servers(spec);
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> extra = {"--checkpoint_dir=" + ckpt, "--checkpoint_every_steps=10",
                                          "--metrics_out=" + dir_ + "/resumed.json"};
  auto first = run_chief(spec, extra, dir_ + "/first.log");
  ASSERT_TRUE(first.ok());
  const std::string index = ckpt + "/ckpt-10/shard-0-of-1.index";
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!std::filesystem::exists(index) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(std::filesystem::exists(index)) << ReadFile(dir_ + "/first.log");
  (*first)->Signal(SIGKILL);
  ASSERT_TRUE((*first)->Wait(absl::Seconds(30)).ok());

  auto second = run_chief(spec, extra, dir_ + "/second.log");
  ASSERT_TRUE(second.ok());
  auto exit = (*second)->Wait(absl::Seconds(180));
  ASSERT_TRUE(exit.ok());
  const std::string log = ReadFile(dir_ + "/second.log");
  ASSERT_EQ(exit->ToString(), "exit 0") << log;
  EXPECT_THAT(log, HasSubstr("restored every shard from " + ckpt + " step 1"));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/resumed.json"));
  EXPECT_EQ(j["final_variables_sha256"], straight_sha);
  EXPECT_GE(j["checkpoints_written"].get<int>(), 1);
}

// The chief is killed while the workers run a unit and started again at
// once, as Kubernetes and compose do. Worker 1 dies with it, so worker 0's
// unit cannot end by itself (its sync step waits for worker 1): the new
// chief's StartJob must cancel that orphaned unit (before it restores the
// servers, so no orphaned push lands after the restore), and the job ends
// with the variables of a run that never stopped.
TEST_F(FaultTest, AChiefRestartedAtOnceCancelsTheOrphanedUnitAndFinishes) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::vector<std::string> job = {"--mode=sync",          "--model=seed_cnn",
                                        "--batch_size=64",      "--epochs=2",
                                        "--steps_per_epoch=20", "--max_train_examples=2560",
                                        "--intra_op_threads=1", "--eval_threads=1",
                                        "--unit_steps=10",      SmallData()};
  auto run_chief = [&](std::vector<std::string> extra, const std::string& log) {
    launcher::SubprocessOptions o;
    o.argv = {BinPath("chief"), "--startup_timeout=60s"};
    o.argv.insert(o.argv.end(), job.begin(), job.end());
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}};
    o.stdout_path = log;
    o.stderr_path = "=stdout";
    return launcher::Subprocess::Spawn(o);
  };
  // A run that never stops (the chief shuts its tasks down at the end).
  std::string straight_sha;
  {
    auto ps = StartTask(cluster::TaskType::kPs, 0);
    auto w0 = StartTask(cluster::TaskType::kWorker, 0);
    auto w1 = StartTask(cluster::TaskType::kWorker, 1);
    ASSERT_TRUE(ps && w0 && w1);
    auto chief = run_chief({"--metrics_out=" + dir_ + "/straight.json"}, dir_ + "/straight.log");
    ASSERT_TRUE(chief.ok());
    auto exit = (*chief)->Wait(absl::Seconds(180));
    ASSERT_TRUE(exit.ok());
    ASSERT_EQ(exit->ToString(), "exit 0") << ReadFile(dir_ + "/straight.log");
    straight_sha =
        nlohmann::json::parse(ReadFile(dir_ + "/straight.json"))["final_variables_sha256"];
  }

  auto ps = StartTask(cluster::TaskType::kPs, 0);
  auto w0 = StartTask(cluster::TaskType::kWorker, 0);
  auto w1 = StartTask(cluster::TaskType::kWorker, 1);
  ASSERT_TRUE(ps && w0 && w1);
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> extra = {"--checkpoint_dir=" + ckpt, "--checkpoint_every_steps=10",
                                          "--metrics_out=" + dir_ + "/resumed.json"};
  auto first = run_chief(extra, dir_ + "/first.log");
  ASSERT_TRUE(first.ok());
  // Until worker 0 runs the unit after the checkpoint of step 10 (polled,
  // bounded).
  auto stub =
      proto::Worker::NewStub(rpc::CreateChannel(spec_.Address(cluster::TaskType::kWorker, 0), {}));
  bool running = false;
  proto::WorkerStatus status;
  grpc::Status answer;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!running && absl::Now() < deadline) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, {}, absl::Seconds(5));
    context.set_wait_for_ready(true);  // the worker may still be starting
    answer = stub->GetStatus(&context, {}, &status);
    running = answer.ok() && status.state() == proto::WorkerStatus::RUNNING &&
              status.current_unit() >= 10 &&
              std::filesystem::exists(ckpt + "/ckpt-10/shard-0-of-1.index");
    if (!running) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(running) << answer.error_message() << " " << status.ShortDebugString() << "\n"
                       << ReadFile(dir_ + "/first.log");
  w1->process().Signal(SIGKILL);
  (*first)->Signal(SIGKILL);
  ASSERT_TRUE((*first)->Wait(absl::Seconds(30)).ok());
  ASSERT_TRUE(w1->process().Wait(absl::Seconds(30)).ok());
  // Everything back at once: a new worker 1 and the chief.
  w1 = StartTask(cluster::TaskType::kWorker, 1);
  auto second = run_chief(extra, dir_ + "/second.log");
  ASSERT_TRUE(second.ok());
  auto exit = (*second)->Wait(absl::Seconds(180));
  ASSERT_TRUE(exit.ok());
  const std::string log = ReadFile(dir_ + "/second.log");
  ASSERT_EQ(exit->ToString(), "exit 0") << log << "\nworker 0:\n" << w0->Log();
  EXPECT_THAT(w0->Log(), HasSubstr("worker: cancelled unit 10, started by a previous chief"));
  EXPECT_THAT(log, HasSubstr("restored every shard from " + ckpt + " step 10"));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/resumed.json"));
  EXPECT_EQ(j["final_variables_sha256"], straight_sha);
}

}  // namespace
}  // namespace testing
}  // namespace psc

namespace psc {
namespace testing {
namespace {

// Starts `pscluster launch` with the small job; returns it and its log path.
std::unique_ptr<launcher::Subprocess> LaunchJob(const std::string& dir,
                                                const std::vector<std::string>& launch,
                                                const std::vector<std::string>& chief) {
  launcher::SubprocessOptions o;
  o.argv = {BinPath("pscluster"), "launch"};
  o.argv.insert(o.argv.end(), launch.begin(), launch.end());
  o.argv.push_back("--");
  for (const char* f : {"--model=mlp", "--optimizer=momentum", "--epochs=3", "--steps_per_epoch=10",
                        "--max_train_examples=6400", "--intra_op_threads=1", "--eval_threads=1",
                        "--unit_steps=5"}) {
    o.argv.push_back(f);
  }
  o.argv.insert(o.argv.end(), chief.begin(), chief.end());
  o.stdout_path = dir + "/launch.log";
  o.stderr_path = "=stdout";
  auto p = launcher::Subprocess::Spawn(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// Starts `pscluster launch` with the small job, sends `signal` to `task`
// once `after` is in the log, and waits (up to `timeout`) for the launcher
// to exit 0. Returns the log (empty after a failed assertion).
std::string RunKillingATask(const std::string& dir, const std::vector<std::string>& launch,
                            const std::vector<std::string>& chief, const std::string& after,
                            const std::string& task, int signal, absl::Duration timeout) {
  auto launcher = LaunchJob(dir, launch, chief);
  EXPECT_NE(launcher, nullptr);
  if (launcher == nullptr) return "";
  const std::string log = dir + "/launch.log";
  EXPECT_TRUE(WaitForLog(log, after)) << ReadFile(log);
  const int pid = LaunchedPid(ReadFile(log), task);
  EXPECT_GT(pid, 0);
  if (pid <= 0) return "";
  kill(pid, signal);  // a stopped task is ended by the launcher's SIGKILL at the end
  auto exit = launcher->Wait(timeout);
  EXPECT_TRUE(exit.ok());
  const std::string out = ReadFile(log);
  EXPECT_TRUE(exit.ok() && exit->ToString() == "exit 0") << out;
  return out;
}

// Runs the small sync job on 1 ps + 2 workers, sends `signal` to worker:1
// once epoch 1 is done, and expects the job to finish on the survivor with
// worker:1 counted lost, the chief's log saying `lost`, and the counters
// balanced. Returns the launcher's log.
std::string ExpectTheSyncJobOutlivesWorker1(const std::string& dir, int signal,
                                            const std::vector<std::string>& chief_flags,
                                            const std::string& lost) {
  std::vector<std::string> flags = {"--mode=sync", "--metrics_out=" + dir + "/result.json"};
  flags.insert(flags.end(), chief_flags.begin(), chief_flags.end());
  const std::string out =
      RunKillingATask(dir, {"--ps=1", "--workers=2"}, flags, "[chief:0] Epoch 1/3", "worker:1",
                      signal, absl::Seconds(150));
  EXPECT_FALSE(out.empty());
  if (out.empty()) return out;
  EXPECT_THAT(out, HasSubstr(lost));
  auto j = nlohmann::json::parse(ReadFile(dir + "/result.json"));
  EXPECT_EQ(j["workers_lost"], 1);
  EXPECT_EQ(j["steps"], 30);
  EXPECT_EQ(j["gradients_accepted"].get<int64_t>(),
            j["gradients_applied"].get<int64_t>() + j["gradients_dropped_stale"].get<int64_t>() +
                j["gradients_discarded"].get<int64_t>());
  return out;
}

TEST_F(FaultTest, AKilledWorkerIsLostAndTheSyncJobFinishes) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  ExpectTheSyncJobOutlivesWorker1(dir_, SIGKILL, {}, "chief: worker:1 is lost");
}

// --push_overlap: worker:1 dies with parts of its push sent and others not;
// the servers' half-assembled push never counts, and the job finishes.
TEST_F(FaultTest, AKilledWorkerPushingInPartsIsLostAndTheSyncJobFinishes) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string out = ExpectTheSyncJobOutlivesWorker1(
      dir_, SIGKILL, {"--push_overlap", "--bucket_bytes=4096", "--wire_dtype=bfloat16"},
      "chief: worker:1 is lost");
  EXPECT_THAT(out, HasSubstr("worker 0: pushes in parts as the backward pass makes them"));
}

// A worker that hangs (SIGSTOP) fails no unit and its connections stay open:
// only its stopped heartbeats tell. The chief declares it lost after
// --heartbeat_timeout, the servers stop waiting for its gradients, and the
// job finishes on the survivor.
TEST_F(FaultTest, AHungWorkerIsLostByItsHeartbeatsAndTheSyncJobFinishes) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  ExpectTheSyncJobOutlivesWorker1(dir_, SIGSTOP, {"--heartbeat_timeout=5s"},
                                  "chief: worker:1 is lost (no heartbeat for");
}

TEST_F(FaultTest, AKilledServerIsRestartedAndTheChiefRestoresIt) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto launcher =
      LaunchJob(dir_, {"--ps=2", "--workers=2", "--restart_failed"},
                {"--mode=sync", "--checkpoint_dir=" + dir_ + "/ckpt", "--checkpoint_every_steps=10",
                 "--metrics_out=" + dir_ + "/result.json"});
  ASSERT_NE(launcher, nullptr);
  const std::string log = dir_ + "/launch.log";
  ASSERT_TRUE(WaitForLog(log, "[chief:0] Epoch 1/3")) << ReadFile(log);
  const int pid = LaunchedPid(ReadFile(log), "ps:1");
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  auto exit = launcher->Wait(absl::Seconds(180));
  ASSERT_TRUE(exit.ok());
  const std::string out = ReadFile(log);
  ASSERT_EQ(exit->ToString(), "exit 0") << out;
  EXPECT_THAT(out, HasSubstr("restarted ps:1"));
  EXPECT_THAT(out, HasSubstr("chief: a parameter server failed; restored every shard"));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/result.json"));
  EXPECT_GE(j["recoveries"].get<int>(), 1);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.5);
}

// multi_worker_mirrored, 3 workers: worker:2 killed -9 mid-job. The
// survivors' all-reduce fails, the chief brings them to one step and they go
// on as a group of 2 from memory: no checkpoint restore, no restart.
TEST_F(FaultTest, AKilledMirroredWorkerIsSurvivedByTheGroupWithoutARestore) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string out =
      RunKillingATask(dir_, {"--strategy=multi_worker_mirrored", "--workers=3"},
                      {"--batch_size=96", "--metrics_out=" + dir_ + "/result.json"},
                      "[chief:0] Epoch 1/3", "worker:2", SIGKILL, absl::Seconds(150));
  ASSERT_FALSE(out.empty());
  EXPECT_THAT(out, HasSubstr("chief: worker:2 is lost"));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/result.json"));
  EXPECT_EQ(j["strategy"], "multi_worker_mirrored");
  EXPECT_EQ(j["workers_lost"], 1);
  EXPECT_EQ(j["recoveries"], 0);
  EXPECT_EQ(j["steps"], 30);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.5);
}

// The same kill with the launcher's --restart_failed: the restarted worker
// (empty) is given the job and a peer's replica at a unit boundary and
// joins the group again.
TEST_F(FaultTest, AKilledMirroredWorkerRestartedByTheLauncherJoinsTheGroupAgain) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  // The seed CNN, 120 steps: long enough for the restart to join (it joined
  // at step 20 of 120 on 2 vCPUs, the other tests running).
  const std::string out =
      RunKillingATask(dir_, {"--strategy=multi_worker_mirrored", "--workers=3", "--restart_failed"},
                      {"--model=seed_cnn", "--batch_size=96", "--epochs=12", SmallData(),
                       "--metrics_out=" + dir_ + "/result.json"},
                      "[chief:0] Epoch 1/12", "worker:2", SIGKILL, absl::Seconds(170));
  ASSERT_FALSE(out.empty());
  EXPECT_THAT(out, HasSubstr("restarted worker:2"));
  EXPECT_THAT(out, HasSubstr("chief: worker:2 joins again"));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/result.json"));
  EXPECT_EQ(j["workers_lost"], 1);
  EXPECT_EQ(j["workers_joined"], 1);
  EXPECT_EQ(j["recoveries"], 0);
  EXPECT_EQ(j["steps"], 120);
}

// A separate chief of a multi_worker_mirrored cluster killed -9 after a
// checkpoint: restarted, it restores every worker's replica from the
// checkpoint (written by one worker, in the ps format) and finishes with
// the bits of a run that never stopped.
TEST_F(FaultTest, AKilledMirroredChiefResumesFromTheLatestCheckpoint) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const ClusterSpec spec(0, 2);
  const std::vector<std::string> job = {"--strategy=multi_worker_mirrored",
                                        "--model=mlp",
                                        "--optimizer=momentum",
                                        "--batch_size=64",
                                        "--epochs=2",
                                        "--steps_per_epoch=20",
                                        "--max_train_examples=2560",
                                        "--intra_op_threads=1",
                                        "--eval_threads=1",
                                        "--unit_steps=5"};
  auto start_workers = [&] {
    std::vector<std::unique_ptr<Daemon>> w;
    for (int i = 0; i < 2; ++i) {
      auto d = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, i), {}, dir_);
      EXPECT_TRUE(d.ok()) << d.status();
      if (d.ok()) w.push_back(*std::move(d));
    }
    return w;
  };
  auto run_chief = [&](std::vector<std::string> extra, const std::string& log) {
    launcher::SubprocessOptions o;
    o.argv = {BinPath("chief"), "--startup_timeout=60s"};
    o.argv.insert(o.argv.end(), job.begin(), job.end());
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = {{"TF_CONFIG", spec.TfConfig(cluster::TaskType::kChief, 0)}};
    o.stdout_path = log;
    o.stderr_path = "=stdout";
    return launcher::Subprocess::Spawn(o);
  };
  std::string straight_sha;
  {
    auto workers = start_workers();
    ASSERT_EQ(workers.size(), 2u);
    auto chief = run_chief({"--metrics_out=" + dir_ + "/straight.json"}, dir_ + "/straight.log");
    ASSERT_TRUE(chief.ok());
    auto exit = (*chief)->Wait(absl::Seconds(150));
    ASSERT_TRUE(exit.ok());
    ASSERT_EQ(exit->ToString(), "exit 0") << ReadFile(dir_ + "/straight.log");
    straight_sha =
        nlohmann::json::parse(ReadFile(dir_ + "/straight.json"))["final_variables_sha256"];
    for (auto& w : workers) ASSERT_TRUE(w->process().Wait(absl::Seconds(60)).ok());
  }
  auto workers = start_workers();
  ASSERT_EQ(workers.size(), 2u);
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> extra = {"--checkpoint_dir=" + ckpt, "--checkpoint_every_steps=10",
                                          "--metrics_out=" + dir_ + "/resumed.json"};
  auto first = run_chief(extra, dir_ + "/first.log");
  ASSERT_TRUE(first.ok());
  // Until the checkpoint of step 10 is complete (polled, bounded).
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  bool written = false;
  while (!written && absl::Now() < deadline) {
    written = std::filesystem::exists(ckpt + "/ckpt-10/shard-0-of-1.index");
    if (!written) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(written) << ReadFile(dir_ + "/first.log");
  (*first)->Signal(SIGKILL);
  ASSERT_TRUE((*first)->Wait(absl::Seconds(30)).ok());
  auto second = run_chief(extra, dir_ + "/second.log");
  ASSERT_TRUE(second.ok());
  auto exit = (*second)->Wait(absl::Seconds(150));
  ASSERT_TRUE(exit.ok());
  const std::string out = ReadFile(dir_ + "/second.log");
  ASSERT_EQ(exit->ToString(), "exit 0") << out;
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/resumed.json"));
  EXPECT_EQ(j["steps"], 40);
  EXPECT_EQ(j["final_variables_sha256"], straight_sha);
}

// TF_CONFIG of workers only: worker 0 runs the chief's role. Killed -9
// after a checkpoint, the job stops (as in TensorFlow); restarted with the
// same flags, worker 0 resumes from the checkpoint and the job finishes.
TEST_F(FaultTest, AKilledWorkerZeroWithoutAChiefTaskResumesFromTheCheckpointWhenRestarted) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const ClusterSpec spec(0, 2, /*with_chief=*/false);
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> job = {"--strategy=multi_worker_mirrored",
                                        "--model=seed_cnn",
                                        "--batch_size=64",
                                        "--epochs=2",
                                        "--steps_per_epoch=20",
                                        "--max_train_examples=2560",
                                        "--intra_op_threads=1",
                                        "--eval_threads=1",
                                        "--unit_steps=5",
                                        "--checkpoint_dir=" + ckpt,
                                        "--checkpoint_every_steps=10",
                                        "--metrics_out=" + dir_ + "/result.json",
                                        SmallData()};
  auto w1 = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 1), {}, dir_);
  auto w0 = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 0), job, dir_);
  ASSERT_TRUE(w0.ok() && w1.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  bool written = false;
  while (!written && absl::Now() < deadline) {
    written = std::filesystem::exists(ckpt + "/ckpt-10/shard-0-of-1.index");
    if (!written) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(written) << (*w0)->Log();
  (*w0)->process().Signal(SIGKILL);
  ASSERT_TRUE((*w0)->process().Wait(absl::Seconds(30)).ok());
  EXPECT_FALSE((*w1)->process().Poll().has_value()) << "worker 1 waits for its chief";
  auto again = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 0), job, dir_);
  ASSERT_TRUE(again.ok());
  auto e0 = (*again)->process().Wait(absl::Seconds(150));
  auto e1 = (*w1)->process().Wait(absl::Seconds(60));
  ASSERT_TRUE(e0.ok() && e1.ok());
  ASSERT_EQ(e0->ToString(), "exit 0") << (*again)->Log();
  EXPECT_EQ(e1->ToString(), "exit 0") << (*w1)->Log();
  EXPECT_THAT((*again)->Log(), HasSubstr("chief: restored every shard from " + ckpt));
  auto j = nlohmann::json::parse(ReadFile(dir_ + "/result.json"));
  EXPECT_EQ(j["steps"], 40);
}

// A worker killed -9 mid-job and started again at its address once the
// chief has declared it lost (its log says so: the rejoin path, not a
// reconnect) registers again, is admitted (sync: at a unit boundary, with
// its slot; async: at once, taking units from the queue) and trains again;
// the job completes with every unit accounted once.
TEST_F(FaultTest, AKilledWorkerRestartedAfterItsLossRejoinsInSyncAndAsync) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  for (const std::string mode : {"sync", "async"}) {
    SCOPED_TRACE(mode);
    const std::string log = dir_ + "/" + mode + ".log";
    const std::string result = dir_ + "/" + mode + ".json";
    auto ps = StartTask(cluster::TaskType::kPs, 0);
    auto w0 = StartTask(cluster::TaskType::kWorker, 0);
    auto w1 = StartTask(cluster::TaskType::kWorker, 1);
    ASSERT_TRUE(ps && w0 && w1);
    launcher::SubprocessOptions o;
    o.argv = {BinPath("chief"),
              "--startup_timeout=60s",
              "--mode=" + mode,
              "--model=seed_cnn",
              "--batch_size=64",
              "--epochs=7",
              "--steps_per_epoch=10",
              "--max_train_examples=640",
              "--intra_op_threads=1",
              "--eval_threads=1",
              "--unit_steps=5",
              "--metrics_out=" + result,
              SmallData()};
    o.env = {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}};
    o.stdout_path = log;
    o.stderr_path = "=stdout";
    auto chief = launcher::Subprocess::Spawn(o);
    ASSERT_TRUE(chief.ok()) << chief.status();
    ASSERT_TRUE(WaitForLog(log, "Epoch 2/7")) << ReadFile(log);
    w1->process().Signal(SIGKILL);
    ASSERT_TRUE(w1->process().Wait(absl::Seconds(30)).ok());
    ASSERT_TRUE(WaitForLog(log, "chief: worker:1 is lost")) << ReadFile(log);
    w1 = StartTask(cluster::TaskType::kWorker, 1);
    ASSERT_NE(w1, nullptr);
    auto exit = (*chief)->Wait(absl::Seconds(240));
    ASSERT_TRUE(exit.ok());
    const std::string out = ReadFile(log);
    ASSERT_EQ(exit->ToString(), "exit 0") << out;
    EXPECT_THAT(out, HasSubstr("chief: worker:1 joins again"));
    auto j = nlohmann::json::parse(ReadFile(result));
    EXPECT_EQ(j["workers_lost"], 1);
    EXPECT_EQ(j["workers_rejoined"], 1);
    EXPECT_EQ(j["steps"], 70);
    ASSERT_EQ(j["membership"].size(), 2u) << j["membership"].dump();
    EXPECT_EQ(j["membership"][0]["change"], "lost");
    EXPECT_EQ(j["membership"][1]["change"], "rejoined");
    const int64_t back_at = j["membership"][1]["step"];
    // It trained again after it was back.
    int after = 0;
    std::map<std::pair<int64_t, int64_t>, int> runs;  // (step, slot) -> times
    for (const auto& u : j["units"]) {
      if (u["worker"] == 1 && u["first_step"].get<int64_t>() >= back_at) ++after;
      if (mode == "async") {
        EXPECT_EQ(u["num_slots"], 2);
        for (int64_t t = u["first_step"]; t < u["end"].get<int64_t>(); ++t) {
          ++runs[{t, u["slot"].get<int64_t>()}];
        }
      }
    }
    EXPECT_GT(after, 0) << j["units"].dump();
    if (mode == "async") {
      // Every step's both slots exactly once, whoever ran them.
      EXPECT_EQ(runs.size(), 140u);
      for (const auto& [key, n] : runs) EXPECT_EQ(n, 1) << key.first << "/" << key.second;
      EXPECT_EQ(j["gradients_applied"], 140);
    }
    EXPECT_EQ(j["gradients_accepted"].get<int64_t>(),
              j["gradients_applied"].get<int64_t>() + j["gradients_dropped_stale"].get<int64_t>() +
                  j["gradients_discarded"].get<int64_t>());
    // Every epoch's examples accounted.
    for (const auto& e : j["epochs"]) {
      const auto& x = e["examples"];
      EXPECT_EQ(x["trained"].get<int64_t>() + x["dropped"].get<int64_t>() +
                    x["skipped"].get<int64_t>() + x["lost"].get<int64_t>(),
                x["expected"].get<int64_t>())
          << e.dump();
    }
  }
}

// A worker that was not in the chief's TF_CONFIG joins the running job
// (`worker --join`), trains units, and leaves drained on SIGTERM with exit
// 0 and no unit lost; one with a wrong token is refused at once.
TEST_F(FaultTest, AWorkerJoinsARunningJobAndLeavesDrainedOnSigterm) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  WriteFile(dir_ + "/token", "join-test-token-0123456789abcdef\n");
  WriteFile(dir_ + "/wrong", "not-the-cluster-token-0123456789\n");
  const std::string token = "--auth_token_file=" + dir_ + "/token";
  auto start = [&](cluster::TaskType type, int index) {
    auto d = Daemon::Start(type == cluster::TaskType::kPs ? "ps_server" : "worker",
                           spec_.TfConfig(type, index), {token}, dir_);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  };
  auto ps = start(cluster::TaskType::kPs, 0);
  auto w0 = start(cluster::TaskType::kWorker, 0);
  auto w1 = start(cluster::TaskType::kWorker, 1);
  ASSERT_TRUE(ps && w0 && w1);
  const std::string log = dir_ + "/chief.log";
  const std::string result = dir_ + "/result.json";
  launcher::SubprocessOptions o;
  o.argv = {BinPath("chief"),
            "--startup_timeout=60s",
            "--mode=async",
            "--model=seed_cnn",
            "--batch_size=64",
            "--epochs=8",
            "--steps_per_epoch=10",
            "--max_train_examples=640",
            "--intra_op_threads=1",
            "--eval_threads=1",
            "--unit_steps=2",
            "--max_workers=4",
            "--metrics_out=" + result,
            SmallData(),
            token};
  o.env = {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}};
  o.stdout_path = log;
  o.stderr_path = "=stdout";
  auto chief = launcher::Subprocess::Spawn(o);
  ASSERT_TRUE(chief.ok()) << chief.status();
  // As soon as the job runs (the join is admitted at once in async).
  ASSERT_TRUE(WaitForLog(log, "chief: cluster ready")) << ReadFile(log);
  const std::string chief_address = spec_.Address(cluster::TaskType::kChief, 0);
  auto ports = launcher::PickFreeLoopbackPorts(2);
  ASSERT_TRUE(ports.ok()) << ports.status();
  // A wrong token: refused by the chief, exit 1, nothing joined.
  auto bad = Daemon::Start(
      "worker", "",
      {"--join=" + chief_address, absl::StrCat("--advertise_address=127.0.0.1:", (*ports)[1]),
       "--auth_token_file=" + dir_ + "/wrong"},
      dir_);
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto bad_exit = (*bad)->process().Wait(absl::Seconds(30));
  ASSERT_TRUE(bad_exit.ok());
  EXPECT_EQ(bad_exit->ToString(), "exit 1") << (*bad)->Log();
  EXPECT_THAT((*bad)->Log(), HasSubstr("Join"));
  EXPECT_THAT((*bad)->Log(), HasSubstr("token"));
  // The new worker.
  const std::string joiner_address = absl::StrCat("127.0.0.1:", (*ports)[0]);
  auto joiner = Daemon::Start(
      "worker", "", {"--join=" + chief_address, "--advertise_address=" + joiner_address, token},
      dir_);
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  ASSERT_TRUE(WaitForLog(log, "chief: worker:2 at " + joiner_address + " joins the job"))
      << ReadFile(log) << (*joiner)->Log();
  // A scaled TFJob: the operator's TF_CONFIG lists 4 workers, this one the
  // 4th, beyond the chief's 2. It registers, is told OUT_OF_RANGE, and
  // joins at its own index.
  auto more = launcher::PickFreeLoopbackPorts(2);
  ASSERT_TRUE(more.ok()) << more.status();
  const std::string scaled_address = absl::StrCat("127.0.0.1:", (*more)[1]);
  const std::string scaled_tf_config = absl::StrCat(
      R"({"cluster": {"chief": [")", chief_address, R"("], "ps": [")",
      spec_.Address(cluster::TaskType::kPs, 0), R"("], "worker": [")",
      spec_.Address(cluster::TaskType::kWorker, 0), R"(", ")",
      spec_.Address(cluster::TaskType::kWorker, 1), R"(", "127.0.0.1:)", (*more)[0], R"(", ")",
      scaled_address, R"("]}, "task": {"type": "worker", "index": 3}, "environment": "cloud"})");
  auto scaled = Daemon::Start("worker", scaled_tf_config, {token}, dir_);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ASSERT_TRUE(WaitForLog(log, "chief: worker:3 at " + scaled_address + " joins the job"))
      << ReadFile(log) << (*scaled)->Log();
  // While it runs a unit, drain it: it finishes the unit, then leaves.
  {
    auto stub = proto::Worker::NewStub(
        rpc::CreateChannel(joiner_address, {.token = "join-test-token-0123456789abcdef"}));
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    bool running = false;
    while (!running && absl::Now() < give_up) {
      grpc::ClientContext context;
      rpc::PrepareContext(&context, {.token = "join-test-token-0123456789abcdef"},
                          absl::Seconds(5));
      proto::WorkerStatus status;
      running = stub->GetStatus(&context, proto::GetStatusRequest(), &status).ok() &&
                status.state() == proto::WorkerStatus::RUNNING;
      if (!running) absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_TRUE(running) << (*joiner)->Log();
  }
  (*joiner)->process().Signal(SIGTERM);
  auto joiner_exit = (*joiner)->process().Wait(absl::Seconds(120));
  ASSERT_TRUE(joiner_exit.ok());
  const std::string joiner_log = (*joiner)->Log();
  EXPECT_EQ(joiner_exit->ToString(), "exit 0") << joiner_log;
  EXPECT_THAT(joiner_log, HasSubstr("worker:2 left the job, drained"));
  auto exit = (*chief)->Wait(absl::Seconds(240));
  ASSERT_TRUE(exit.ok());
  const std::string out = ReadFile(log);
  ASSERT_EQ(exit->ToString(), "exit 0") << out;
  // The scaled worker is shut down with the cluster at the end.
  auto scaled_exit = (*scaled)->process().Wait(absl::Seconds(60));
  ASSERT_TRUE(scaled_exit.ok());
  EXPECT_EQ(scaled_exit->ToString(), "exit 0") << (*scaled)->Log();
  auto j = nlohmann::json::parse(ReadFile(result));
  EXPECT_EQ(j["workers_joined"], 2);
  EXPECT_EQ(j["workers_rejoined"], 0);
  EXPECT_EQ(j["workers_drained"], 1);
  EXPECT_EQ(j["workers_lost"], 0);
  EXPECT_EQ(j["gradients_applied"], 160);
  ASSERT_EQ(j["membership"].size(), 3u) << j["membership"].dump();
  std::map<std::string, int> changes;  // "worker:change" -> times
  for (const auto& m : j["membership"]) {
    ++changes[absl::StrCat(m["worker"].get<int>(), ":", m["change"].get<std::string>())];
  }
  EXPECT_EQ(changes,
            (std::map<std::string, int>{{"2:joined", 1}, {"3:joined", 1}, {"2:drained", 1}}));
  int by_joiner = 0;
  std::map<std::pair<int64_t, int64_t>, int> runs;  // (step, slot) -> times
  for (const auto& u : j["units"]) {
    if (u["worker"] == 2) ++by_joiner;
    EXPECT_EQ(u["num_slots"], 2);
    for (int64_t t = u["first_step"]; t < u["end"].get<int64_t>(); ++t) {
      ++runs[{t, u["slot"].get<int64_t>()}];
    }
  }
  EXPECT_GT(by_joiner, 0) << j["units"].dump();
  EXPECT_EQ(runs.size(), 160u);
  for (const auto& [key, n] : runs) EXPECT_EQ(n, 1) << key.first << "/" << key.second;
}

}  // namespace
}  // namespace testing
}  // namespace psc
