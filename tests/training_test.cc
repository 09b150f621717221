// Integration: the training job end to end with real processes (launcher,
// ps_server, workers, chief) on a training subset, and the chief's bad job
// flags. Labelled integration; the chief-restart case is in fault_test.
#include <cmath>
#include <filesystem>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A small job: mlp, momentum, 2 epochs of 10 steps on 6,400 examples.
std::vector<std::string> SmallJobFlags(const std::string& mode, const std::string& out) {
  return {"--mode=" + mode,       "--model=mlp",          "--optimizer=momentum",
          "--epochs=2",           "--steps_per_epoch=10", "--max_train_examples=6400",
          "--intra_op_threads=1", "--eval_threads=1",     "--unit_steps=5",
          "--metrics_out=" + out};
}

nlohmann::json Launch(const std::string& mode, int ps, int workers, const std::string& out) {
  std::vector<std::string> argv = {BinPath("pscluster"), "launch", "--ps=" + std::to_string(ps),
                                   "--workers=" + std::to_string(workers), "--"};
  for (const std::string& f : SmallJobFlags(mode, out)) argv.push_back(f);
  auto r = RunProgram(argv, {}, absl::Seconds(240));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("[chief:0] Epoch 2/2"));
  EXPECT_THAT(r->out, HasSubstr("[launcher] chief:0 exited: exit 0"));
  return nlohmann::json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
}

// `pscluster launch` of 1 ps and 2 sync workers running `job`.
std::vector<std::string> SyncClusterArgv(const std::vector<std::string>& job,
                                         const std::string& out) {
  std::vector<std::string> argv = {
      BinPath("pscluster"), "launch",           "--ps=1",         "--workers=2",         "--",
      "--mode=sync",        "--eval_threads=1", "--unit_steps=5", "--metrics_out=" + out};
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

class TrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
    dir_ = MakeTempDir("training");
  }
  std::string dir_;
};

TEST_F(TrainingTest, SyncAndAsyncEndToEnd) {
  for (const std::string mode : {"sync", "async"}) {
    auto j = Launch(mode, 1, 2, dir_ + "/" + mode + ".json");
    ASSERT_FALSE(j.is_discarded()) << mode;
    EXPECT_EQ(j["mode"], mode);
    EXPECT_EQ(j["cluster"]["ps"], 1);
    EXPECT_EQ(j["cluster"]["workers"], 2);
    ASSERT_EQ(j["epochs"].size(), 2u);
    EXPECT_LT(j["epochs"][1]["loss"].get<double>(), j["epochs"][0]["loss"].get<double>()) << mode;
    EXPECT_GT(j["epochs"][1]["val_accuracy"].get<double>(), 0.5) << mode;
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.5) << mode;
    // The accounting invariant, and every replica's gradient of every step.
    const int64_t accepted = j["gradients_accepted"];
    EXPECT_EQ(accepted, j["gradients_applied"].get<int64_t>() +
                            j["gradients_dropped_stale"].get<int64_t>() +
                            j["gradients_discarded"].get<int64_t>());
    EXPECT_EQ(accepted, 2 * 10 * 2);
    EXPECT_EQ(j["final_variables_sha256"].get<std::string>().size(), 64u);
    if (mode == "sync") {
      EXPECT_EQ(j["staleness"]["max"], 0);
    }
  }
}

TEST_F(TrainingTest, SyncIsBitForBitReproducible) {
  auto a = Launch("sync", 2, 2, dir_ + "/a.json");
  auto b = Launch("sync", 2, 2, dir_ + "/b.json");
  ASSERT_FALSE(a.is_discarded() || b.is_discarded());
  EXPECT_EQ(a["final_variables_sha256"], b["final_variables_sha256"]);
}

// A Keras config with Dropout: the masks follow the examples of the step's
// global batch, so 2 sync workers (each its slot's half) draw the masks one
// standalone replica draws over the whole batch, and train the same model.
TEST_F(TrainingTest, DropoutInSyncTrainingIsTheOneReplicaJob) {
  const std::string model = dir_ + "/dropout.json";
  WriteFile(model, R"({"class_name": "Sequential", "config": {"name": "dropout_mlp", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 28, 28, 1]}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 64, "activation": "relu"}},
      {"class_name": "Dropout", "config": {"name": "dropout", "rate": 0.5}},
      {"class_name": "Dense", "config": {"name": "dense_1", "units": 10}}]}})");
  const std::vector<std::string> job = {"--model=" + model,    "--optimizer=momentum",
                                        "--epochs=1",          "--steps_per_epoch=10",
                                        "--batch_size=64",     "--max_train_examples=6400",
                                        "--intra_op_threads=1"};
  std::vector<std::string> alone = {BinPath("worker"), "--standalone",
                                    "--metrics_out=" + dir_ + "/alone.json"};
  alone.insert(alone.end(), job.begin(), job.end());
  const std::vector<std::string> cluster = SyncClusterArgv(job, dir_ + "/cluster.json");
  for (const auto& argv : {alone, cluster}) {
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  }
  auto a = nlohmann::json::parse(ReadFile(dir_ + "/alone.json"), nullptr, false);
  auto c = nlohmann::json::parse(ReadFile(dir_ + "/cluster.json"), nullptr, false);
  ASSERT_FALSE(a.is_discarded() || c.is_discarded());
  // The same masks and batches: the losses agree to float rounding (other
  // masks would move them by about 1e-2).
  const double la = a["epochs"][0]["loss"], lc = c["epochs"][0]["loss"];
  EXPECT_NEAR(la, lc, 1e-4 * la);
  const double ta = a["test_loss"], tc = c["test_loss"];
  EXPECT_NEAR(ta, tc, 1e-4 * ta);
}

// BatchNormalization on a cluster: each sync worker normalizes its slot's
// half of the batch with that half's statistics and pushes them; the server
// averages the two into the moving statistics. That is what one process with
// two local replicas computes (each its half, the statistics' mean), and not
// what one replica over the whole batch computes (the batch's statistics).
// The test loss reads the moving statistics, so it checks them too.
TEST_F(TrainingTest, BatchNormalizationInSyncTrainingIsTheTwoReplicaJob) {
  const std::string model = dir_ + "/bn.json";
  WriteFile(model, R"({"class_name": "Sequential", "config": {"name": "bn_cnn", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 28, 28, 1]}},
      {"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 8, "kernel_size": 3,
        "strides": 2, "padding": "same", "use_bias": false}},
      {"class_name": "BatchNormalization", "config": {"name": "bn", "momentum": 0.8}},
      {"class_name": "ReLU", "config": {"name": "relu"}},
      {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": 2}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 10}}]}})");
  const std::vector<std::string> job = {"--model=" + model,    "--optimizer=momentum",
                                        "--epochs=1",          "--steps_per_epoch=10",
                                        "--batch_size=64",     "--max_train_examples=6400",
                                        "--intra_op_threads=1"};
  auto standalone = [&](int replicas, const std::string& out) {
    std::vector<std::string> argv = {BinPath("worker"), "--standalone", "--device=cpu",
                                     "--virtual_devices=" + std::to_string(replicas),
                                     "--metrics_out=" + out};
    argv.insert(argv.end(), job.begin(), job.end());
    return argv;
  };
  const std::vector<std::string> cluster = SyncClusterArgv(job, dir_ + "/cluster.json");
  for (const auto& argv :
       {standalone(2, dir_ + "/two.json"), standalone(1, dir_ + "/one.json"), cluster}) {
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  }
  auto two = nlohmann::json::parse(ReadFile(dir_ + "/two.json"), nullptr, false);
  auto one = nlohmann::json::parse(ReadFile(dir_ + "/one.json"), nullptr, false);
  auto c = nlohmann::json::parse(ReadFile(dir_ + "/cluster.json"), nullptr, false);
  ASSERT_FALSE(two.is_discarded() || one.is_discarded() || c.is_discarded());
  const double l2 = two["epochs"][0]["loss"], lc = c["epochs"][0]["loss"];
  const double l1 = one["epochs"][0]["loss"];
  EXPECT_NEAR(l2, lc, 1e-4 * l2);
  const double t2 = two["test_loss"], tc = c["test_loss"];
  EXPECT_NEAR(t2, tc, 1e-4 * t2) << "the moving statistics differ";
  // One replica over the whole batch normalizes with other statistics.
  EXPECT_GT(std::abs(l1 - l2), 1e-3 * l2) << "one replica " << l1 << ", two " << l2;
}

// Keras's dynamic loss scaling (--loss_scale; a model's LossScaleOptimizer)
// end to end. A model compiled with LossScaleOptimizer(SGD, initial_scale
// 2^127, dynamic_growth_steps 2) and a summed loss overflows float32 at
// first and again after each doubling, so steps are skipped all along:
//   - the cluster skips the steps the one process skips, and ends with its
//     scale and its variables, bit for bit;
//   - every shard decides alike (sync and async), and the accounting holds;
//   - a scale that never overflows (a power of two) is exactly undone: the
//     variables are those of the job without loss scaling.
TEST_F(TrainingTest, LossScalingSkipsOverflowedStepsAlikeEverywhere) {
  const std::string model = dir_ + "/scaled.json";
  WriteFile(model, R"({"class_name": "Sequential", "config": {"name": "scaled_mlp", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 28, 28, 1]}},
      {"class_name": "Flatten", "config": {"name": "flatten"}},
      {"class_name": "Dense", "config": {"name": "dense", "units": 32, "activation": "relu"}},
      {"class_name": "Dense", "config": {"name": "dense_1", "units": 10}}]},
    "compile_config": {
      "optimizer": {"module": "keras.optimizers", "class_name": "LossScaleOptimizer",
        "config": {"name": "loss_scale_optimizer",
          "inner_optimizer": {"module": "keras.optimizers", "class_name": "SGD",
                              "config": {"name": "sgd", "learning_rate": 0.0005}},
          "initial_scale": 1.7014118346046923e+38, "dynamic_growth_steps": 2}},
      "loss": {"module": "keras.losses", "class_name": "SparseCategoricalCrossentropy",
        "config": {"name": "sparse_categorical_crossentropy", "reduction": "sum",
                   "from_logits": true}}}})");
  const std::vector<std::string> job = {"--model=" + model, "--epochs=2", "--steps_per_epoch=10",
                                        "--max_train_examples=6400", "--intra_op_threads=1"};
  auto cluster = [&](int ps, int workers, const std::string& mode,
                     const std::vector<std::string>& flags, const std::string& out) {
    std::vector<std::string> argv = {BinPath("pscluster"),
                                     "launch",
                                     "--ps=" + std::to_string(ps),
                                     "--workers=" + std::to_string(workers),
                                     "--",
                                     "--mode=" + mode,
                                     "--eval_threads=1",
                                     "--unit_steps=5",
                                     "--metrics_out=" + out};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  };
  std::vector<std::string> alone = {BinPath("worker"), "--standalone",
                                    "--metrics_out=" + dir_ + "/alone.json"};
  alone.insert(alone.end(), job.begin(), job.end());
  const std::vector<std::string> mlp = {
      "--model=mlp",          "--optimizer=momentum",      "--epochs=1",
      "--steps_per_epoch=10", "--max_train_examples=6400", "--intra_op_threads=1"};
  std::vector<std::string> exact = mlp, unscaled = mlp;
  exact.push_back("--loss_scale=dynamic:1024:4");
  unscaled.push_back("--loss_scale=none");
  for (const auto& argv : {alone, cluster(2, 1, "sync", job, dir_ + "/one.json"),
                           cluster(2, 2, "sync", job, dir_ + "/sync.json"),
                           cluster(2, 2, "async", job, dir_ + "/async.json"),
                           cluster(2, 2, "sync", exact, dir_ + "/exact.json"),
                           cluster(2, 2, "sync", unscaled, dir_ + "/unscaled.json")}) {
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  }
  auto read = [&](const std::string& name) {
    return nlohmann::json::parse(ReadFile(dir_ + "/" + name + ".json"), nullptr, false);
  };
  const nlohmann::json a = read("alone"), one = read("one");
  ASSERT_FALSE(a.is_discarded() || one.is_discarded());
  const nlohmann::json& ls = a["loss_scale"];
  ASSERT_TRUE(ls.is_object()) << a.dump();
  EXPECT_EQ(ls["initial"].get<double>(), 1.7014118346046923e+38);
  EXPECT_EQ(ls["growth_steps"], 2);
  const int64_t skipped = ls["steps_skipped"];
  EXPECT_GT(skipped, 0) << "no overflow: the test injects none";
  EXPECT_LT(skipped, 20) << "every step overflowed: nothing trained";
  EXPECT_EQ(a["gradients_applied"].get<int64_t>(), 20 - skipped);
  EXPECT_EQ(one["loss_scale"]["steps_skipped"], skipped);
  EXPECT_EQ(one["loss_scale"]["final"], ls["final"]);
  EXPECT_EQ(one["final_variables_sha256"], a["final_variables_sha256"]);
  for (const std::string name : {"one", "sync", "async"}) {
    const nlohmann::json j = read(name);
    ASSERT_FALSE(j.is_discarded()) << name;
    const nlohmann::json& l = j["loss_scale"];
    ASSERT_EQ(l["shard_steps_skipped"].size(), 2u) << name;
    EXPECT_GT(l["steps_skipped"].get<int64_t>(), 0) << name;
    EXPECT_EQ(l["shard_steps_skipped"][0], l["shard_steps_skipped"][1]) << name;
    if (name != "async") {  // async: the shards see pushes in their own orders
      EXPECT_EQ(l["shard_scales"][0], l["shard_scales"][1]) << name;
    }
    EXPECT_EQ(j["gradients_accepted"].get<int64_t>(),
              j["gradients_applied"].get<int64_t>() + j["gradients_dropped_stale"].get<int64_t>() +
                  j["gradients_discarded"].get<int64_t>() + l["gradients_skipped"].get<int64_t>())
        << name;
    EXPECT_TRUE(std::isfinite(j["test_loss"].get<double>())) << name;
  }
  const nlohmann::json e = read("exact"), u = read("unscaled");
  ASSERT_FALSE(e.is_discarded() || u.is_discarded());
  EXPECT_EQ(e["loss_scale"]["steps_skipped"], 0);
  EXPECT_GT(e["loss_scale"]["final"].get<double>(), 1024.0) << "it grew";
  EXPECT_TRUE(u["loss_scale"].is_null());
  EXPECT_EQ(e["final_variables_sha256"], u["final_variables_sha256"]);
}

TEST(ChiefJobFlagsTest, BadJobFlagsExitTwoBeforeAnythingStarts) {
  ClusterSpec spec(1, 1);  // nothing is started: the chief must not get that far
  struct Case {
    std::string flag, message;
  };
  const std::vector<Case> cases = {
      {"--model=resnet",
       "--model=resnet: unknown model \"resnet\"; expected seed_cnn, mlp, or a Keras model file"},
      {"--batch_size=0", "--batch_size=0: must be in [1, 65536]"},
      {"--mode=bulk", "--mode=bulk: expected sync, async or ssp"},
      {"--data_dir=/nonexistent", "--data_dir=/nonexistent: not a readable directory"},
      {"--unit_steps=0", "--unit_steps >= 1"},
      {"--eval_every_steps=-1", "--eval_every_steps=-1: must be >= 0"},
      {"--batch_size=60000", "--batch_size=60000 is more than the 55000 training examples"},
      {"--checkpoint_dir=/proc/psc-ckpt", "--checkpoint_dir=/proc/psc-ckpt: cannot create"},
      {"--logdir=/proc/psc-logs", "--logdir=/proc/psc-logs: cannot create"},
      {"--batch_sizee=3", "unknown flag --batch_sizee; did you mean --batch_size?"},
      {"--replicas_to_aggregate=-1", "--replicas_to_aggregate=-1: must be >= 0"},
      // The cluster has one worker.
      {"--replicas_to_aggregate=2", "--replicas_to_aggregate=2: must be in [0, 1]"},
      {"--strategy=tpu", "--strategy=tpu: TPUStrategy is not supported"},
      {"--strategy=ring", "--strategy=ring: expected parameter_server, multi_worker_mirrored"},
      {"--strategy=mirrored", "--strategy=mirrored trains on one worker's devices with no chief"},
      {"--strategy=multi_worker_mirrored --mode=async",
       "--strategy=multi_worker_mirrored trains synchronously with every replica: --mode=async"},
      {"--strategy=multi_worker_mirrored --bucket_bytes=-1",
       "--bucket_bytes=-1: must be 0 (the default) to 1 GiB"},
      {"--strategy=multi_worker_mirrored --collective_timeout=0s",
       "--collective_timeout=0: must be in (0, 1h]"},
      // The cluster has a ps: this strategy takes none, and says so.
      {"--strategy=multi_worker_mirrored",
       "--strategy=multi_worker_mirrored takes none (every worker holds a full replica"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {BinPath("chief"), "--startup_timeout=60s"};
    for (absl::string_view f : absl::StrSplit(c.flag, ' ')) argv.emplace_back(f);
    auto r = RunProgram(argv, {{"TF_CONFIG", spec.TfConfig(cluster::TaskType::kChief, 0)}},
                        absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << c.flag;
    EXPECT_THAT(r->err, HasSubstr(c.message)) << c.flag;
    EXPECT_LT(r->wall, absl::Seconds(10)) << "it must not wait for the cluster";
  }
}

// An empty data directory is the user's mistake (exit 2), found before the
// chief serves; --help and --version are no failures.
TEST(ChiefJobFlagsTest, AnEmptyDataDirExitsTwoAndHelpAndVersionExitZero) {
  ClusterSpec spec(1, 1);
  const std::string empty = MakeTempDir("empty_data");
  auto r =
      RunProgram({BinPath("chief"), "--data_dir=" + empty},
                 {{"TF_CONFIG", spec.TfConfig(cluster::TaskType::kChief, 0)}}, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 2") << r->err;
  EXPECT_THAT(r->err, HasSubstr("train-images-idx3-ubyte.gz not found"));
  EXPECT_THAT(r->err, HasSubstr("--data_dir"));
  for (const char* program : {"chief", "worker", "ps_server", "evaluator", "pscluster"}) {
    auto help = RunProgram({BinPath(program), "--help"}, {}, absl::Seconds(60));
    ASSERT_TRUE(help.ok());
    EXPECT_EQ(help->exit.ToString(), "exit 0") << program;
    EXPECT_THAT(help->out, HasSubstr("Usage")) << program;
    auto version = RunProgram({BinPath(program), "--version"}, {}, absl::Seconds(60));
    ASSERT_TRUE(version.ok());
    EXPECT_EQ(version->exit.ToString(), "exit 0") << program;
    EXPECT_THAT(version->out, HasSubstr("pscluster 0.1.0")) << program;
  }
}

// multi_worker_mirrored with the launcher: no ps task, the workers'
// replicas all-reduced, the result file's strategy and overlap figures.
TEST_F(TrainingTest, MultiWorkerMirroredEndToEnd) {
  const std::string out = dir_ + "/mwm.json";
  std::vector<std::string> argv = {BinPath("pscluster"), "launch",
                                   "--strategy=multi_worker_mirrored", "--workers=2", "--"};
  for (const std::string& f : SmallJobFlags("sync", out)) argv.push_back(f);
  argv.push_back("--logdir=" + dir_ + "/tb");
  argv.push_back("--checkpoint_dir=" + dir_ + "/ckpt");
  auto r = RunProgram(argv, {}, absl::Seconds(240));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, Not(HasSubstr("started ps:")));
  EXPECT_THAT(r->out, HasSubstr("in collective group"));
  auto j = nlohmann::json::parse(ReadFile(out));
  EXPECT_EQ(j["strategy"], "multi_worker_mirrored");
  EXPECT_EQ(j["cluster"]["ps"], 0);
  EXPECT_EQ(j["steps"], 20);
  EXPECT_GT(j["comm_s"].get<double>(), 0);
  EXPECT_GE(j["comm_hidden_fraction"].get<double>(), 0);
  EXPECT_LE(j["comm_hidden_fraction"].get<double>(), 1);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.5);
  // One worker wrote the checkpoint, in the format `pscluster export` reads.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt/ckpt-20/shard-0-of-1.index"));
  auto exported = RunProgram({BinPath("pscluster"), "export", dir_ + "/ckpt", "--model=mlp",
                              "--out=" + dir_ + "/m.weights.h5"},
                             {}, absl::Seconds(60));
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->exit.ToString(), "exit 0") << exported->err;
  // The ps strategy (one ps: the same placement) resumes from it.
  std::vector<std::string> ps = SyncClusterArgv(
      {"--model=mlp", "--optimizer=momentum", "--epochs=3", "--steps_per_epoch=10",
       "--max_train_examples=6400", "--intra_op_threads=1", "--checkpoint_dir=" + dir_ + "/ckpt"},
      dir_ + "/ps.json");
  auto resumed = RunProgram(ps, {}, absl::Seconds(240));
  ASSERT_TRUE(resumed.ok());
  ASSERT_EQ(resumed->exit.ToString(), "exit 0") << resumed->out << resumed->err;
  EXPECT_THAT(resumed->out,
              HasSubstr("chief: restored every shard from " + dir_ + "/ckpt step 20"));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir_ + "/ps.json"))["steps"], 30);
}

// TensorFlow's MultiWorkerMirroredStrategy TF_CONFIG: workers only. Worker
// 0 runs the chief's role in its process and takes the job flags.
TEST_F(TrainingTest, MultiWorkerMirroredWithoutAChiefTask) {
  const ClusterSpec spec(0, 2, /*with_chief=*/false);
  const std::string out = dir_ + "/nochief.json";
  std::vector<std::string> flags = {"--strategy=multi_worker_mirrored", "--startup_timeout=60s"};
  for (const std::string& f : SmallJobFlags("sync", out)) flags.push_back(f);
  auto w0 = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 0), flags, dir_);
  auto w1 = Daemon::Start("worker", spec.TfConfig(cluster::TaskType::kWorker, 1), {}, dir_);
  ASSERT_TRUE(w0.ok() && w1.ok());
  auto e0 = (*w0)->process().Wait(absl::Seconds(180));
  auto e1 = (*w1)->process().Wait(absl::Seconds(60));
  ASSERT_TRUE(e0.ok() && e1.ok());
  EXPECT_EQ(e0->ToString(), "exit 0") << (*w0)->Log();
  EXPECT_EQ(e1->ToString(), "exit 0") << (*w1)->Log();
  auto j = nlohmann::json::parse(ReadFile(out));
  EXPECT_EQ(j["strategy"], "multi_worker_mirrored");
  EXPECT_EQ(j["steps"], 20);
}

// The single-machine presets: mirrored (one standalone worker, a replica
// per device) and central_storage (one ps beside one worker's replicas).
TEST_F(TrainingTest, MirroredAndCentralStoragePresets) {
  for (const std::string strategy : {"mirrored", "central_storage"}) {
    const std::string out = dir_ + "/" + strategy + ".json";
    std::vector<std::string> argv = {BinPath("pscluster"), "launch", "--strategy=" + strategy,
                                     "--local_replicas=2", "--"};
    for (const std::string& f : SmallJobFlags("sync", out)) argv.push_back(f);
    auto r = RunProgram(argv, {}, absl::Seconds(240));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit.ToString(), "exit 0") << strategy << r->out << r->err;
    auto j = nlohmann::json::parse(ReadFile(out));
    EXPECT_EQ(j["strategy"], strategy);
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.5) << strategy;
  }
  auto bad = RunProgram({BinPath("pscluster"), "launch", "--strategy=central_storage",
                         "--workers=3", "--", "--epochs=1"},
                        {}, absl::Seconds(60));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit.ToString(), "exit 2");
  EXPECT_THAT(bad->err, HasSubstr("is one machine's preset"));
  auto negative = RunProgram({BinPath("pscluster"), "launch", "--strategy=mirrored",
                              "--local_replicas=-1", "--", "--epochs=1"},
                             {}, absl::Seconds(60));
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(negative->exit.ToString(), "exit 2");
  EXPECT_THAT(negative->err, HasSubstr("--local_replicas must not be negative"));
  auto with_ps = RunProgram({BinPath("pscluster"), "launch", "--strategy=multi_worker_mirrored",
                             "--ps=2", "--", "--epochs=1"},
                            {}, absl::Seconds(60));
  ASSERT_TRUE(with_ps.ok());
  EXPECT_EQ(with_ps->exit.ToString(), "exit 2");
  EXPECT_THAT(with_ps->err, HasSubstr("runs no ps task"));
}

}  // namespace
}  // namespace testing
}  // namespace psc
