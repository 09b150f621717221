// bench/compute_cpu: examples per second of a full training step of
// seed_cnn on the CPU backend (oneDNN), against PyTorch on the same
// machine in the same run.
//
// A step is what a worker does before it pushes: gather the batch, forward,
// loss, backward, and copy the gradients to host memory ready to push.
// Timing follows ../shared/anchors/torch_seed_cnn.py: batch 128, 10 warm-up
// steps, then 60 timed steps, 3 repeats, median of the repeats' examples/s.
// If Debian's PyTorch is importable by /usr/bin/python3, that script runs
// with --malloc tuned --formats nhwc --threads N and its figure is the peer;
// otherwise the bench says so and leaves speedup_vs_torch out.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/data/prefetcher.h"
#include "launcher/subprocess.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, threads, 2, "Intra-op threads for both pscluster and PyTorch.");
ABSL_FLAG(int, batch, 128, "Examples per step.");
ABSL_FLAG(int, warmup, 10, "Warm-up steps per repeat.");
ABSL_FLAG(int, steps, 60, "Timed steps per repeat.");
ABSL_FLAG(int, repeats, 3, "Repeats; the reported figure is their median.");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST IDX files.");
ABSL_FLAG(std::string, anchors_dir, PSC_SOURCE_DIR "/../shared/anchors",
          "Where torch_seed_cnn.py is.");
ABSL_FLAG(bool, torch, true, "Run the PyTorch peer when it is available.");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");

namespace {

using Json = nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs the PyTorch anchor; returns its examples/s for NHWC at `threads`, or
// the reason it could not.
absl::StatusOr<double> TorchExamplesPerSecond(int threads, const std::string& anchors) {
  const std::string script = anchors + "/torch_seed_cnn.py";
  if (!std::filesystem::exists(script)) return absl::NotFoundError(script + " not found");
  auto probe = psc::launcher::Subprocess::Spawn({.argv = {"/usr/bin/python3", "-c", "import torch"},
                                                 .stdout_path = "/dev/null",
                                                 .stderr_path = "/dev/null"});
  if (!probe.ok()) return absl::NotFoundError("/usr/bin/python3 not found");
  auto probed = (*probe)->Wait(absl::Minutes(2));
  if (!probed.ok() || !probed->exited || probed->exit_code != 0) {
    return absl::NotFoundError("PyTorch is not installed (apt-get install python3-torch)");
  }
  const std::string out =
      (std::filesystem::temp_directory_path() / absl::StrCat("torch_seed_cnn-", getpid(), ".json"))
          .string();
  auto run = psc::launcher::Subprocess::Spawn(
      {.argv = {"/usr/bin/python3", script, "--malloc", "tuned", "--formats", "nhwc", "--threads",
                std::to_string(threads), "--infer-batches", "", "--epochs", "0", "--out", out},
       .stdout_path = "/dev/null",
       .stderr_path = "/dev/null"});
  if (!run.ok()) return run.status();
  auto done = (*run)->Wait(absl::Minutes(20));
  if (!done.ok() || !done->exited || done->exit_code != 0) {
    return absl::InternalError("torch_seed_cnn.py failed");
  }
  std::ifstream in(out);
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(out);
  if (j.is_discarded()) return absl::InternalError("torch_seed_cnn.py wrote no JSON");
  for (const Json& t : j["runs"]["tuned"]["train_throughput"]) {
    if (t["threads"] == threads && t["memory_format"] == "nhwc") {
      return t["examples_per_s_median"].get<double>();
    }
  }
  return absl::InternalError("torch_seed_cnn.py: no NHWC figure for that thread count");
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
  auto backend = psc::compute::CreateCpuBackend(threads);
  auto model = psc::compute::Model::Create("seed_cnn");
  if (!plan.ok() || !backend.ok() || !model.ok()) {
    std::fprintf(stderr, "compute_cpu: setup failed\n");
    return 1;
  }
  auto exec = psc::compute::Executor::Create(&*model, backend->get());
  if (!exec.ok() || !(*exec)->SetParameters(model->Initialize(0)).ok()) return 1;

  std::vector<std::vector<float>> grads;
  std::vector<double> rates;
  int64_t step = 0;
  for (int r = 0; r < repeats; ++r) {
    absl::Time start;
    for (int i = 0; i < warmup + steps; ++i, ++step) {
      if (i == warmup) start = absl::Now();
      auto indices = plan->Indices(step, 0, 1);
      auto b = indices.ok() ? psc::data::GatherBatch(data->train, *indices, step)
                            : absl::StatusOr<psc::data::Batch>(indices.status());
      psc::compute::StepResult result;
      absl::Status s = b.ok()
                           ? (*exec)->ComputeGradients(b->images, b->labels, 1.0f / batch, &result)
                           : b.status();
      if (s.ok()) s = (*exec)->CopyGradients(&grads);
      if (!s.ok()) {
        std::fprintf(stderr, "compute_cpu: step failed: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    rates.push_back(steps * batch / absl::ToDoubleSeconds(absl::Now() - start));
  }
  Json result = {
      {"bench", "compute_cpu"},
      {"model", "seed_cnn"},
      {"batch", batch},
      {"threads", psc::compute::CpuBackendThreads()},
      {"examples_per_s", std::round(Median(rates) * 10) / 10},
      {"examples_per_s_runs", rates},
      {"ms_per_step", std::round(1000.0 * batch / Median(rates) * 100) / 100},
      {"step", "gather + forward + loss + backward + gradients copied to host"},
      {"conditions", {{"warmup_steps", warmup}, {"timed_steps", steps}, {"repeats", repeats}}}};
  if (absl::GetFlag(FLAGS_torch)) {
    auto torch = TorchExamplesPerSecond(threads, absl::GetFlag(FLAGS_anchors_dir));
    if (torch.ok()) {
      result["torch_examples_per_s"] = *torch;
      result["torch_peer"] = "torch_seed_cnn.py --malloc tuned --formats nhwc (same run)";
      result["speedup_vs_torch"] = std::round(100 * Median(rates) / *torch) / 100;
    } else {
      result["torch_unavailable"] = std::string(torch.status().message());
    }
  }
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}
