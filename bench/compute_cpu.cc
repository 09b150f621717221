// bench/compute_cpu: examples per second of a full training step of
// seed_cnn on the CPU backend (oneDNN), against PyTorch and Keras 3 `fit` on
// the same machine in the same run, interleaved.
//
// A step is what a worker does before it pushes: gather the batch, forward,
// loss, backward, and copy the gradients to host memory ready to push.
// Timing follows ../shared/anchors/torch_seed_cnn.py: batch 128, 10 warm-up
// steps, then 60 timed steps. Each of --repeats rounds runs one repeat of
// ours, then the PyTorch peer (torch_seed_cnn.py --malloc tuned --formats
// nhwc, its own median of 3), then the Keras peer (tf_pss.py --fit, Keras 3
// on TensorFlow 2.21), so load that comes and goes hits all three alike; the
// figures are the medians over the rounds and the ratios are of the medians.
// PyTorch is Debian's python3-torch (/usr/bin/python3); TensorFlow comes from
// a virtual environment at --tf_venv, which the bench creates if it is absent
// (pip, ~600 MB) unless --tf_create=false. A peer that is not available is
// named in the output and its ratio left out.
//
// Also reported, from the same run:
//   * sgemm_gflops: oneDNN's SGEMM on --sgemm_size square matrices at the same
//     thread count, the machine's matrix-multiply rate;
//   * fraction_of_matmul_peak: examples/s times the step's FLOPs counted as
//     direct convolution (direct_mflop_per_example) over sgemm_gflops. Winograd
//     does fewer multiplications, so this "direct-equivalent" fraction can pass 1;
//   * breakdown_ms: milliseconds per step of every op, by layer and direction,
//     from --breakdown_steps further steps through a timing wrapper, plus
//     the convolution algorithms the backend chose.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/timed_backend.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/data/prefetcher.h"
#include "common/keras/keras_config.h"
#include "dnnl.h"
#include "launcher/subprocess.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, threads, 2, "Intra-op threads for pscluster and the peers.");
ABSL_FLAG(int, batch, 128, "Examples per step.");
ABSL_FLAG(int, warmup, 10, "Warm-up steps per repeat.");
ABSL_FLAG(int, steps, 60, "Timed steps per repeat.");
ABSL_FLAG(int, repeats, 3, "Rounds (ours, then each peer); figures are medians over them.");
ABSL_FLAG(std::string, conv_algorithm, "auto", "The CPU backend's convolutions: auto or direct.");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST IDX files.");
ABSL_FLAG(std::string, anchors_dir, PSC_SOURCE_DIR "/../shared/anchors",
          "Where torch_seed_cnn.py and tf_pss.py are.");
ABSL_FLAG(bool, torch, true, "Run the PyTorch peer when it is available.");
ABSL_FLAG(bool, tf, true, "Run the Keras 3 fit peer when TensorFlow is available.");
ABSL_FLAG(std::string, tf_venv, "",
          "TensorFlow's virtual environment; default ~/.cache/pscluster-bench/tf-2.21.");
ABSL_FLAG(bool, tf_create, true, "Create --tf_venv with pip when it is absent.");
ABSL_FLAG(int, sgemm_size, 2048, "Side of the square SGEMM that measures the matmul rate.");
ABSL_FLAG(int, breakdown_steps, 10, "Steps timed op by op for breakdown_ms (0: none).");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");

namespace {

using Json = nlohmann::json;
using psc::launcher::Subprocess;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// v rounded to `unit` (0.1, 0.01, ...), printed without binary noise.
double Round(double v, double unit) { return std::round(v / unit) / std::round(1 / unit); }

absl::Status RunQuietly(const std::vector<std::string>& argv, absl::Duration timeout,
                        const std::string& log) {
  auto p = Subprocess::Spawn({.argv = argv, .stdout_path = log, .stderr_path = "=stdout"});
  if (!p.ok()) return p.status();
  auto done = (*p)->Wait(timeout);
  if (!done.ok()) return done.status();
  if (!done->exited || done->exit_code != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " ", argv.size() > 1 ? argv[1] : "", ": ",
                                            done->ToString(), " (output in ", log, ")"));
  }
  return absl::OkStatus();
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / absl::StrCat(name, "-", getpid())).string();
}

absl::StatusOr<Json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(path);
  if (j.is_discarded()) return absl::InternalError(path + ": no JSON");
  return j;
}

absl::Status TorchAvailable() {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    return absl::NotFoundError("/usr/bin/python3 not found");
  }
  if (!RunQuietly({"/usr/bin/python3", "-c", "import torch"}, absl::Minutes(2), "/dev/null").ok()) {
    return absl::NotFoundError("PyTorch is not installed (apt-get install python3-torch)");
  }
  return absl::OkStatus();
}

absl::StatusOr<double> TorchExamplesPerSecond(int threads, const std::string& anchors) {
  const std::string out = TempPath("torch_seed_cnn") + ".json";
  absl::Status s = RunQuietly(
      {"/usr/bin/python3", anchors + "/torch_seed_cnn.py", "--malloc", "tuned", "--formats", "nhwc",
       "--threads", std::to_string(threads), "--infer-batches", "", "--epochs", "0", "--out", out},
      absl::Minutes(20), TempPath("torch_seed_cnn") + ".log");
  if (!s.ok()) return s;
  auto j = ReadJson(out);
  if (!j.ok()) return j.status();
  for (const Json& t : (*j)["runs"]["tuned"]["train_throughput"]) {
    if (t["threads"] == threads && t["memory_format"] == "nhwc") {
      return t["examples_per_s_median"].get<double>();
    }
  }
  return absl::InternalError("torch_seed_cnn.py: no NHWC figure for that thread count");
}

std::string TfVenv() {
  if (!absl::GetFlag(FLAGS_tf_venv).empty()) return absl::GetFlag(FLAGS_tf_venv);
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "/root", "/.cache/pscluster-bench/tf-2.21");
}

absl::Status TfAvailable(const std::string& venv) {
  const std::string py = venv + "/bin/python3";
  const std::vector<std::string> check = {py, "-c", "import tensorflow, keras"};
  if (std::filesystem::exists(py) && RunQuietly(check, absl::Minutes(2), "/dev/null").ok()) {
    return absl::OkStatus();
  }
  if (!absl::GetFlag(FLAGS_tf_create)) {
    return absl::NotFoundError(venv + " has no TensorFlow (--tf_create=false)");
  }
  std::fprintf(stderr, "compute_cpu: creating %s (TensorFlow 2.21 from PyPI)...\n", venv.c_str());
  std::filesystem::create_directories(std::filesystem::path(venv).parent_path());
  const std::string log = TempPath("tf_venv") + ".log";
  absl::Status s = RunQuietly({"python3", "-m", "venv", venv}, absl::Minutes(5), log);
  if (s.ok()) {
    s = RunQuietly(
        {venv + "/bin/pip", "install", "-q", "tensorflow-cpu==2.21.*", "tf-keras==2.21.*"},
        absl::Minutes(30), log);
  }
  if (s.ok()) s = RunQuietly(check, absl::Minutes(2), log);
  return s;
}

absl::StatusOr<double> KerasFitExamplesPerSecond(int threads, int batch, int steps,
                                                 const std::string& anchors,
                                                 const std::string& venv) {
  const std::string out = TempPath("tf_fit") + ".json";
  absl::Status s = RunQuietly(
      {venv + "/bin/python3", anchors + "/tf_pss.py", "--fit", "--threads", std::to_string(threads),
       "--batch", std::to_string(batch), "--steps", std::to_string(steps), "--out", out},
      absl::Minutes(20), TempPath("tf_fit") + ".log");
  if (!s.ok()) return s;
  auto j = ReadJson(out);
  if (!j.ok()) return j.status();
  return (*j)["examples_per_s_median"].get<double>();
}

// oneDNN's SGEMM, C = A·B on n x n matrices, best of 5, in GFLOP/s.
double SgemmGflops(int n) {
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (i > 0) best = std::min(best, took.count());  // the first warms up
  }
  return 2.0 * n * n * n / best / 1e9;
}

// FLOPs of one training example counted as direct convolution and plain
// matrix products: forward, backward-weights, and backward-data for every
// layer but the first (nobody needs the input's gradient).
double DirectMflopPerExample(const psc::compute::Model& model) {
  double total = 0;
  bool first = true;
  const psc::compute::LayerGraph& graph = model.graph();
  for (int i = 0; i < graph.num_layers(); ++i) {
    const psc::compute::LayerSpec& l = model.layers()[i];
    // The output's (height, width): the shape rule's.
    const psc::compute::Shape& out = graph.tensor(psc::compute::LayerGraph::OutputOf(i)).shape;
    double f = 0;
    if (l.kind == psc::compute::LayerSpec::kConv) {
      f = 2.0 * out[0] * out[1] * l.window.height * l.window.width * (l.inputs / l.window.groups) *
          l.outputs;
    } else if (l.kind == psc::compute::LayerSpec::kDense) {
      f = 2.0 * l.inputs * l.outputs;
    }
    total += f * (first ? 2 : 3);
    if (f > 0) first = false;
  }
  return total / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int threads = absl::GetFlag(FLAGS_threads), batch = absl::GetFlag(FLAGS_batch),
            warmup = absl::GetFlag(FLAGS_warmup), steps = absl::GetFlag(FLAGS_steps),
            repeats = absl::GetFlag(FLAGS_repeats);
  if (threads < 1 || batch < 1 || warmup < 0 || steps < 1 || repeats < 1) {
    std::fprintf(stderr, "compute_cpu: need --threads, --batch, --steps, --repeats >= 1\n");
    return 2;
  }
  auto conv = psc::compute::ParseConvAlgorithm(absl::GetFlag(FLAGS_conv_algorithm));
  if (!conv.ok()) {
    std::fprintf(stderr, "compute_cpu: --conv_algorithm: %s\n",
                 std::string(conv.status().message()).c_str());
    return 2;
  }
  psc::data::DatasetOptions data_options;
  data_options.data_dir = absl::GetFlag(FLAGS_data_dir);
  auto data = psc::data::LoadFashionMnist(data_options);
  if (!data.ok()) {
    std::fprintf(stderr, "compute_cpu: %s\n", std::string(data.status().message()).c_str());
    return 1;
  }
  psc::data::BatchPlanOptions plan_options;
  plan_options.num_examples = data->train.count;
  plan_options.batch_size = batch;
  auto plan = psc::data::BatchPlan::Create(plan_options);
  auto backend = psc::compute::CreateCpuBackend({.threads = threads, .conv = *conv});
  auto model = psc::keras::BuiltinModel("seed_cnn");
  if (!plan.ok() || !backend.ok() || !model.ok()) {
    std::fprintf(stderr, "compute_cpu: setup failed\n");
    return 1;
  }
  psc::bench::TimedBackend timed(backend->get());
  auto exec = psc::compute::Executor::Create(&*model, backend->get());
  auto timed_exec = psc::compute::Executor::Create(&*model, &timed);
  const auto init = model->Initialize(0);
  if (!exec.ok() || !timed_exec.ok() || !(*exec)->SetParameters(init).ok() ||
      !(*timed_exec)->SetParameters(init).ok()) {
    return 1;
  }

  std::vector<std::vector<float>> grads;
  int64_t step = 0;
  // Runs `count` steps on `e`; the seconds they took.
  auto run_steps = [&](psc::compute::Executor* e, int count) -> absl::StatusOr<double> {
    const absl::Time start = absl::Now();
    for (int i = 0; i < count; ++i, ++step) {
      auto indices = plan->Indices(step, 0, 1);
      if (!indices.ok()) return indices.status();
      auto b = psc::data::GatherBatch(data->train, *indices, step);
      if (!b.ok()) return b.status();
      psc::compute::StepResult result;
      absl::Status s = e->ComputeGradients(b->images, b->labels, 1.0f / batch, &result);
      if (s.ok()) s = e->CopyGradients(&grads);
      if (!s.ok()) return s;
    }
    return absl::ToDoubleSeconds(absl::Now() - start);
  };

  const std::string anchors = absl::GetFlag(FLAGS_anchors_dir);
  const std::string venv = TfVenv();
  Json unavailable = Json::object();
  bool torch = absl::GetFlag(FLAGS_torch), tf = absl::GetFlag(FLAGS_tf);
  if (torch) {
    if (absl::Status s = TorchAvailable(); !s.ok()) {
      unavailable["torch"] = std::string(s.message());
      torch = false;
    }
  }
  if (tf) {
    if (absl::Status s = TfAvailable(venv); !s.ok()) {
      unavailable["keras_fit"] = std::string(s.message());
      tf = false;
    }
  }

  const double sgemm = SgemmGflops(absl::GetFlag(FLAGS_sgemm_size));
  std::vector<double> ours, torch_rates, tf_rates;
  for (int r = 0; r < repeats; ++r) {
    absl::StatusOr<double> w = run_steps(exec->get(), warmup);
    absl::StatusOr<double> t = w.ok() ? run_steps(exec->get(), steps) : w;
    if (!t.ok()) {
      std::fprintf(stderr, "compute_cpu: step failed: %s\n",
                   std::string(t.status().message()).c_str());
      return 1;
    }
    ours.push_back(steps * batch / *t);
    std::fprintf(stderr, "compute_cpu: round %d: pscluster %.1f ex/s\n", r + 1, ours.back());
    if (torch) {
      auto rate = TorchExamplesPerSecond(threads, anchors);
      if (rate.ok()) {
        torch_rates.push_back(*rate);
        std::fprintf(stderr, "compute_cpu: round %d: torch %.1f ex/s\n", r + 1, *rate);
      } else {
        unavailable["torch"] = std::string(rate.status().message());
        torch = false;
      }
    }
    if (tf) {
      auto rate = KerasFitExamplesPerSecond(threads, batch, steps, anchors, venv);
      if (rate.ok()) {
        tf_rates.push_back(*rate);
        std::fprintf(stderr, "compute_cpu: round %d: keras fit %.1f ex/s\n", r + 1, *rate);
      } else {
        unavailable["keras_fit"] = std::string(rate.status().message());
        tf = false;
      }
    }
  }

  const double rate = Median(ours);
  const double mflop = DirectMflopPerExample(*model);
  Json result = {{"bench", "compute_cpu"},
                 {"model", "seed_cnn"},
                 {"batch", batch},
                 {"threads", psc::compute::CpuBackendThreads()},
                 {"conv_algorithm", psc::compute::ConvAlgorithmName(*conv)},
                 {"examples_per_s", Round(rate, 0.1)},
                 {"examples_per_s_runs", ours},
                 {"ms_per_step", Round(1000.0 * batch / rate, 0.01)},
                 {"step", "gather + forward + loss + backward + gradients copied to host"},
                 {"sgemm_gflops", Round(sgemm, 0.1)},
                 {"direct_mflop_per_example", Round(mflop, 0.1)},
                 {"fraction_of_matmul_peak", Round(rate * mflop / 1e3 / sgemm, 0.001)},
                 {"conditions",
                  {{"warmup_steps", warmup},
                   {"timed_steps", steps},
                   {"repeats", repeats},
                   {"interleaved", "each round: pscluster, then torch, then keras fit"}}}};
  if (!torch_rates.empty() && torch_rates.size() == ours.size()) {
    result["torch_examples_per_s"] = Median(torch_rates);
    result["torch_examples_per_s_runs"] = torch_rates;
    result["torch_peer"] = "torch_seed_cnn.py --malloc tuned --formats nhwc";
    result["speedup_vs_torch"] = Round(rate / Median(torch_rates), 0.01);
  }
  if (!tf_rates.empty() && tf_rates.size() == ours.size()) {
    result["keras_fit_examples_per_s"] = Median(tf_rates);
    result["keras_fit_examples_per_s_runs"] = tf_rates;
    result["keras_fit_peer"] = "tf_pss.py --fit (Keras 3, TensorFlow 2.21, " + venv + ")";
    result["speedup_vs_tf"] = Round(rate / Median(tf_rates), 0.01);
  }
  if (!unavailable.empty()) result["peers_unavailable"] = unavailable;

  const int breakdown_steps = absl::GetFlag(FLAGS_breakdown_steps);
  if (breakdown_steps > 0) {
    if (!run_steps(timed_exec->get(), 3).ok()) return 1;  // warm the second executor
    timed.Reset();
    auto took = run_steps(timed_exec->get(), breakdown_steps);
    if (!took.ok()) return 1;
    Json ms = Json::object();
    double in_ops = 0;
    for (const auto& [key, seconds] : timed.seconds()) {
      ms[key] = Round(1000 * seconds / breakdown_steps, 0.01);
      in_ops += seconds;
    }
    ms["(outside ops: gather, bookkeeping)"] =
        Round(1000 * (*took - in_ops) / breakdown_steps, 0.01);
    ms["(whole step)"] = Round(1000 * *took / breakdown_steps, 0.01);
    result["breakdown_ms"] = ms;
    result["convolutions"] = psc::compute::CpuConvolutionsChosen(**backend);
  }
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}
