// bench/compute_gpu: examples per second of a full training step of
// seed_cnn on the CUDA backend (cuDNN + cuBLAS, float32, TF32 off), at
// batch 128 and 1024, against PyTorch eager on the same GPU in the same run.
//
// A step is what a worker does before it pushes: the host batch copied in,
// forward, loss (read by the host), backward, and the gradients copied to
// host memory ready to push. PyTorch runs the same step (NCHW, its default;
// cudnn.benchmark on, TF32 off) from an embedded script, when
// `python3 -c "import torch"` works and torch.cuda.is_available(); otherwise
// the JSON says why and leaves the ratio out. Batches are synthetic
// (standard-normal pixels, random labels): step time does not depend on the
// values. 10 warm-up steps, then 60 timed steps, 3 repeats, median.
//
// Ours runs twice: with the default algorithm choice (cuDNN's heuristic,
// bit-reproducible across processes) and with --cudnn_autotune's (cudnnFind's
// timings), so the cost of reproducibility is measured, not guessed.
//
// The peer runs in the environment the caller had before it put the
// bundle's libraries first (--peer_ld_library_path), since PyTorch brings
// its own CUDA libraries; its stderr is kept and reported when it fails.
//
// Without a usable GPU it prints {"bench": "compute_gpu", "skipped": "<why>"}
// and exits 0.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/compute/cuda/cuda_types.h"
#include "common/compute/model.h"
#include "common/gpu_plugin/plugin_loader.h"
#include "common/keras/keras_config.h"
#include "launcher/subprocess.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, batches, "128,1024", "Batch sizes to time, comma-separated.");
ABSL_FLAG(int, warmup, 10, "Warm-up steps per repeat.");
ABSL_FLAG(int, steps, 60, "Timed steps per repeat.");
ABSL_FLAG(int, repeats, 3, "Repeats; the reported figure is their median.");
ABSL_FLAG(int, device, 0, "CUDA ordinal of the GPU.");
ABSL_FLAG(std::string, gpu_plugin, "",
          "The GPU plugin to load; empty = libpsc_cuda_plugin.so beside this binary.");
ABSL_FLAG(bool, allow_tf32, false, "Let cuDNN and cuBLAS use TF32 (PyTorch too).");
ABSL_FLAG(bool, torch, true, "Run the PyTorch peer when it is available.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "The Python that has PyTorch (a path: run_on_device.sh passes `command -v python3`).");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");
ABSL_FLAG(std::string, peer_ld_library_path, "",
          "LD_LIBRARY_PATH for the PyTorch peer: empty inherits this process's, \"unset\" removes "
          "it, anything else replaces it.");
ABSL_FLAG(bool, autotune, true, "Also time ours with cudnn_autotune.");

namespace {

using Json = nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The PyTorch peer: the same model (Keras's seed_cnn), step and timing.
constexpr char kTorchScript[] = R"PY(
import json, statistics, sys, time
import torch
from torch import nn
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch.cuda.is_available() is False"})); sys.exit(0)
batches, warmup, steps, repeats, tf32 = (json.loads(sys.argv[1]), int(sys.argv[2]),
                                         int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
def block(i, o):
    return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.Conv2d(o, o, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2)]
model = nn.Sequential(*block(1, 32), *block(32, 64), *block(64, 128), nn.Flatten(),
                      nn.Linear(1152, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
loss_fn = nn.CrossEntropyLoss()
params = list(model.parameters())
out = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
       "gpu": torch.cuda.get_device_name(0), "examples_per_s": {}}
for b in batches:
    g = torch.Generator().manual_seed(b)
    x_host = torch.randn(b, 1, 28, 28, generator=g)
    y_host = torch.randint(0, 10, (b,), generator=g)
    rates = []
    for r in range(repeats):
        for i in range(warmup + steps):
            if i == warmup:
                torch.cuda.synchronize(); t0 = time.perf_counter()
            x, y = x_host.to(dev), y_host.to(dev)
            for p in params: p.grad = None
            loss = loss_fn(model(x), y)
            loss.item()
            loss.backward()
            grads = torch.cat([p.grad.reshape(-1) for p in params]).cpu()
        torch.cuda.synchronize()
        rates.append(steps * b / (time.perf_counter() - t0))
    out["examples_per_s"][str(b)] = statistics.median(rates)
print(json.dumps(out))
)PY";

// The last `max` bytes of a file ("" if it cannot be read).
std::string Tail(const std::string& path, size_t max = 2000) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > max ? text.substr(text.size() - max) : text;
}

// Runs `argv` in the peer's environment, stdout to `out`, stderr kept; the
// error names the exit and the end of stderr.
absl::Status RunPeer(std::vector<std::string> argv, const std::string& out,
                     absl::Duration timeout) {
  psc::launcher::SubprocessOptions o;
  o.argv = std::move(argv);
  const std::string path = absl::GetFlag(FLAGS_peer_ld_library_path);
  if (path == "unset") {
    o.unset_env.push_back("LD_LIBRARY_PATH");
  } else if (!path.empty()) {
    o.env["LD_LIBRARY_PATH"] = path;
  }
  const std::string err = absl::StrCat(out, ".stderr");
  o.stdout_path = out;
  o.stderr_path = err;
  auto run = psc::launcher::Subprocess::Spawn(o);
  if (!run.ok()) return absl::NotFoundError(absl::StrCat(o.argv[0], ": ", run.status().message()));
  auto done = (*run)->Wait(timeout);
  const std::string stderr_tail = Tail(err);
  std::filesystem::remove(err);
  if (!done.ok()) return absl::DeadlineExceededError(absl::StrCat("timed out: ", stderr_tail));
  if (!done->exited || done->exit_code != 0) {
    return absl::InternalError(absl::StrCat(done->ToString(), ": ", stderr_tail));
  }
  return absl::OkStatus();
}

// Runs the peer; its JSON, or the reason it could not run.
absl::StatusOr<Json> RunTorch(const std::vector<int>& batches, int warmup, int steps, int repeats,
                              bool tf32) {
  const std::string python = absl::GetFlag(FLAGS_python);
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string probe_out =
      (tmp / absl::StrCat("compute_gpu_probe-", getpid(), ".txt")).string();
  absl::Status probed = RunPeer({python, "-c", "import torch"}, probe_out, absl::Minutes(2));
  std::filesystem::remove(probe_out);
  if (!probed.ok()) {
    return absl::NotFoundError(
        absl::StrCat("`", python, " -c \"import torch\"` fails: ", probed.message()));
  }
  const std::string script = (tmp / absl::StrCat("compute_gpu_torch-", getpid(), ".py")).string();
  const std::string out = (tmp / absl::StrCat("compute_gpu_torch-", getpid(), ".json")).string();
  std::ofstream(script) << kTorchScript;
  absl::Status ran = RunPeer({python, script, Json(batches).dump(), std::to_string(warmup),
                              std::to_string(steps), std::to_string(repeats), tf32 ? "1" : "0"},
                             out, absl::Minutes(8));
  std::ifstream in(out);
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(script);
  std::filesystem::remove(out);
  if (!ran.ok())
    return absl::InternalError(absl::StrCat("the PyTorch peer failed: ", ran.message()));
  if (j.is_discarded()) return absl::InternalError("the PyTorch peer wrote no JSON");
  if (j.contains("error")) return absl::FailedPreconditionError(j["error"].get<std::string>());
  return j;
}

// Our examples/s per repeat at `batch`, and the allocator's peak.
absl::Status TimeOurs(psc::gpu::GpuApi* gpu, psc::compute::ComputeBackend* backend,
                      const psc::compute::Model& model, int batch, int warmup, int steps,
                      int repeats, std::vector<double>* rates) {
  PSC_ASSIGN_OR_RETURN(auto exec, psc::compute::Executor::Create(&model, backend));
  PSC_RETURN_IF_ERROR(exec->SetParameters(model.Initialize(0)));
  PSC_RETURN_IF_ERROR(exec->Prepare({batch}, /*training=*/true));  // as a worker does
  std::mt19937 rng(batch);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(batch) * 28 * 28);
  for (float& p : images) p = pixel(rng);
  std::vector<int32_t> labels(batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 10);
  std::vector<std::vector<float>> grads;
  for (int r = 0; r < repeats; ++r) {
    absl::Time start;
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) {
        PSC_RETURN_IF_ERROR(gpu->Synchronize(backend));
        start = absl::Now();
      }
      psc::compute::StepResult result;
      PSC_RETURN_IF_ERROR(exec->ComputeGradients(images, labels, 1.0f / batch, &result));
      PSC_RETURN_IF_ERROR(exec->CopyGradients(&grads));
    }
    rates->push_back(steps * batch / absl::ToDoubleSeconds(absl::Now() - start));
  }
  return absl::OkStatus();
}

int Finish(const Json& result) {
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int warmup = absl::GetFlag(FLAGS_warmup), steps = absl::GetFlag(FLAGS_steps),
            repeats = absl::GetFlag(FLAGS_repeats);
  std::vector<int> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(b, &v) || v < 1) {
      std::fprintf(stderr, "compute_gpu: bad --batches entry \"%s\"\n", std::string(b).c_str());
      return 2;
    }
    batches.push_back(v);
  }
  if (warmup < 0 || steps < 1 || repeats < 1 || batches.empty()) {
    std::fprintf(stderr, "compute_gpu: need --steps, --repeats >= 1 and a batch\n");
    return 2;
  }
  Json result = {{"bench", "compute_gpu"}, {"model", "seed_cnn"}};
  const std::string plugin_path = absl::GetFlag(FLAGS_gpu_plugin).empty()
                                      ? psc::gpu::DefaultGpuPluginPath()
                                      : absl::GetFlag(FLAGS_gpu_plugin);
  auto plugin = psc::gpu::GpuPlugin::Load(plugin_path);
  if (!plugin.ok()) {
    result["skipped"] = std::string(plugin.status().message());
    return Finish(result);
  }
  psc::gpu::GpuApi* gpu = (*plugin)->api();
  std::string why;
  const std::vector<psc::gpu::GpuInfo> gpus = gpu->ListGpus(&why);
  if (gpus.empty()) {
    result["skipped"] = absl::StrCat("no usable GPU: ", why);
    return Finish(result);
  }
  psc::compute::CudaBackendOptions options;
  options.device = absl::GetFlag(FLAGS_device);
  options.allow_tf32 = absl::GetFlag(FLAGS_allow_tf32);
  options.memory_growth = true;
  auto backend = gpu->CreateBackend(options);
  psc::compute::CudaBackendOptions autotune_options = options;
  autotune_options.cudnn_autotune = true;
  auto model = psc::keras::BuiltinModel("seed_cnn");
  if (!backend.ok() || !model.ok()) {
    std::fprintf(stderr, "compute_gpu: %s\n",
                 std::string((backend.ok() ? model.status() : backend.status()).message()).c_str());
    return 1;
  }
  for (const psc::gpu::GpuInfo& g : gpus) {
    if (g.ordinal == options.device) result["gpu"] = g.Description();
  }
  result["libraries"] = gpu->LibraryVersions();
  result["plugin"] = (*plugin)->build();
  result["backend"] = (*backend)->name();
  result["tf32"] = options.allow_tf32;
  result["step"] = "batch copied in + forward + loss read + backward + gradients copied to host";
  result["conditions"] = {{"warmup_steps", warmup}, {"timed_steps", steps}, {"repeats", repeats}};
  auto time_all = [&](psc::compute::ComputeBackend* b) {
    Json rates_by_batch = Json::object();
    for (int batch : batches) {
      std::vector<double> rates;
      if (absl::Status s = TimeOurs(gpu, b, *model, batch, warmup, steps, repeats, &rates);
          !s.ok()) {
        rates_by_batch[std::to_string(batch)] = {{"error", std::string(s.message())}};
        continue;
      }
      rates_by_batch[std::to_string(batch)] = {
          {"examples_per_s", std::round(Median(rates) * 10) / 10},
          {"examples_per_s_runs", rates},
          {"ms_per_step", std::round(1e5 * batch / Median(rates)) / 100}};
    }
    return rates_by_batch;
  };
  Json ours = time_all(backend->get());
  if (auto mem = gpu->MemoryStats(**backend); mem.ok()) {
    result["device_memory_peak_mib"] = mem->peak_in_use_bytes >> 20;
    result["device_memory_held_mib"] = mem->held_bytes >> 20;
  }
  if (auto algos = gpu->DescribeConvAlgorithms(**backend); algos.ok()) {
    result["conv_algorithms"] = *algos;
  }
  result["pscluster"] = ours;
  backend->reset();  // its memory back before the next one takes its own
  if (absl::GetFlag(FLAGS_autotune)) {
    auto tuned = gpu->CreateBackend(autotune_options);
    if (!tuned.ok()) {
      result["pscluster_autotune"] = {{"error", std::string(tuned.status().message())}};
    } else {
      result["pscluster_autotune"] = time_all(tuned->get());
      if (auto algos = gpu->DescribeConvAlgorithms(**tuned); algos.ok()) {
        result["conv_algorithms_autotune"] = *algos;
      }
    }
  }
  if (absl::GetFlag(FLAGS_torch)) {
    auto torch = RunTorch(batches, warmup, steps, repeats, options.allow_tf32);
    if (!torch.ok()) {
      result["torch_unavailable"] = std::string(torch.status().message());
    } else {
      result["torch"] = *torch;
      auto ratios = [&](const Json& mine) {
        Json ratio = Json::object();
        for (int b : batches) {
          const std::string key = std::to_string(b);
          if (mine.contains(key) && mine[key].contains("examples_per_s") &&
              (*torch)["examples_per_s"].contains(key)) {
            ratio[key] = std::round(100 * mine[key]["examples_per_s"].get<double>() /
                                    (*torch)["examples_per_s"][key].get<double>()) /
                         100;
          }
        }
        return ratio;
      };
      result["speedup_vs_torch"] = ratios(ours);
      if (result.contains("pscluster_autotune")) {
        result["speedup_vs_torch_autotune"] = ratios(result["pscluster_autotune"]);
      }
      result["goal"] = "speedup_vs_torch[128] >= 1.5";
    }
  }
  return Finish(result);
}
