// bench/allreduce_bytes: the all-reduce of multi_worker_mirrored alone.
//
// Two ranks in this process, one thread each, form a Gloo group over
// loopback TCP (common/collective/gloo_collective.h, rendezvous through a
// MemoryStore) and all-reduce the reference model's gradients, 435,306
// float32 = 1,741,224 bytes, in place, as a worker does once per step (Gloo's
// ring: each rank sends and receives half the bytes in the reduce-scatter and
// half again in the all-gather, so 1,741,224 bytes out and in per rank).
//
// Each iteration: both ranks refill their buffer with their own gradients,
// meet at a barrier, then time AllReduceSum; the iteration's time is the
// slower rank's. --warmup untimed iterations, then --iters timed ones, per
// repeat; the figures are over all timed iterations. The sum is checked
// against the plain float sum, and rank 0's result against rank 1's, bit for
// bit, after the last iteration.
//
// Prints one JSON object (and writes it to --out when given): median, p90,
// mean, min and max in ms, and MB/s = 1,741,224 bytes / median time (1 MB =
// 1e6 bytes; the "algorithm bandwidth" of nccl-tests, equal to its bus
// bandwidth for 2 ranks). Its peer is ../shared/anchors/tcp_roundtrip.c: the
// same bytes out and back between two processes over raw TCP, which
// bench/allreduce_vs_ddp.sh runs beside it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/malloc_tuning.h"
#include "common/collective/collective.h"
#include "common/collective/gloo_collective.h"
#include "common/collective/memory_store.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int64_t, floats, 435306, "Elements per all-reduce (the seed CNN's parameters).");
ABSL_FLAG(int, warmup, 20, "Untimed all-reduces per repeat.");
ABSL_FLAG(int, iters, 200, "Timed all-reduces per repeat.");
ABSL_FLAG(int, repeats, 3, "Repeats; the figures are over all timed all-reduces.");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");

namespace {

using Json = nlohmann::ordered_json;  // keys in the order written
using psc::collective::Collective;
constexpr int kRanks = 2;

// A reusable barrier for kRanks threads. Thread-safe.
class Barrier {
 public:
  void Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const int64_t generation = generation_;
    if (++arrived_ == kRanks) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    auto passed = [this, generation]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
    mu_.Await(absl::Condition(&passed));
  }

 private:
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// x rounded to `digits` decimals (the double nearest the decimal, so the
// JSON shows it short).
double Round(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "allreduce_bytes: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  psc::base::KeepLargeBuffersOnTheHeap();  // as the daemons do
  const int64_t floats = absl::GetFlag(FLAGS_floats);
  const int warmup = absl::GetFlag(FLAGS_warmup), iters = absl::GetFlag(FLAGS_iters),
            repeats = absl::GetFlag(FLAGS_repeats);
  if (floats < 1 || warmup < 0 || iters < 1 || repeats < 1) {
    std::fprintf(stderr,
                 "allreduce_bytes: need --floats >= 1, --warmup >= 0, --iters >= 1, "
                 "--repeats >= 1\n");
    return 2;
  }
  const size_t n = static_cast<size_t>(floats);
  const size_t bytes = n * sizeof(float);

  // Form the group: one thread per rank, as the ranks would in two workers.
  psc::collective::MemoryStore store;
  psc::collective::GlooOptions options;
  options.hostname = "127.0.0.1";
  options.timeout = absl::Seconds(60);
  std::vector<std::unique_ptr<Collective>> group(kRanks);
  std::vector<absl::Status> status(kRanks);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        auto c =
            psc::collective::CreateGlooCollective(&store, "allreduce_bytes/", r, kRanks, options);
        status[r] = c.status();
        if (c.ok()) group[r] = *std::move(c);
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < kRanks; ++r) {
    if (!status[r].ok()) return Fail(absl::StrCat("forming rank ", r, ": ", status[r].ToString()));
  }

  // Each rank's "gradients": small values, refilled before every all-reduce
  // so that repeated sums neither grow nor overflow.
  std::vector<std::vector<float>> source(kRanks, std::vector<float>(n));
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const uint64_t h = (uint64_t{i} * 2654435761u + static_cast<uint64_t>(r) * 97) % 2001;
      source[r][i] = (static_cast<float>(h) - 1000.0f) * 1e-4f;
    }
  }
  std::vector<std::vector<float>> data = source;
  // seconds[r][k]: rank r's time of timed all-reduce k.
  std::vector<std::vector<double>> seconds(kRanks);
  Barrier barrier;
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        seconds[r].reserve(static_cast<size_t>(repeats) * iters);
        for (int rep = 0; rep < repeats && status[r].ok(); ++rep) {
          for (int i = 0; i < warmup + iters; ++i) {
            std::memcpy(data[r].data(), source[r].data(), bytes);
            barrier.Wait();
            const auto t0 = std::chrono::steady_clock::now();
            status[r] = group[r]->AllReduceSum(absl::MakeSpan(data[r]));
            const auto t1 = std::chrono::steady_clock::now();
            // A failed group fails every later call at once, on both ranks
            // (the peer's call fails too), so both leave the loop.
            if (!status[r].ok()) break;
            if (i >= warmup) seconds[r].push_back(std::chrono::duration<double>(t1 - t0).count());
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < kRanks; ++r) {
    if (!status[r].ok()) return Fail(absl::StrCat("rank ", r, ": ", status[r].ToString()));
  }
  for (size_t i = 0; i < n; ++i) {
    if (data[0][i] != source[0][i] + source[1][i]) {
      return Fail(absl::StrCat("wrong sum at element ", i, ": ", data[0][i],
                               " != ", source[0][i] + source[1][i]));
    }
  }
  if (std::memcmp(data[0].data(), data[1].data(), bytes) != 0) {
    return Fail("rank 1's result differs from rank 0's");
  }

  std::vector<double> ms(seconds[0].size());
  for (size_t k = 0; k < ms.size(); ++k) ms[k] = 1e3 * std::max(seconds[0][k], seconds[1][k]);
  Json per_repeat = Json::array();
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<double> part(ms.begin() + static_cast<size_t>(rep) * iters,
                             ms.begin() + static_cast<size_t>(rep + 1) * iters);
    std::nth_element(part.begin(), part.begin() + part.size() / 2, part.end());
    per_repeat.push_back(Round(part[part.size() / 2], 3));
  }
  std::sort(ms.begin(), ms.end());
  const size_t count = ms.size();
  const double median = ms[count / 2];
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / count;
  Json result = {
      {"bench", "allreduce_bytes"},
      {"collective", group[0]->Describe()},
      {"ranks", kRanks},
      {"floats", floats},
      {"bytes", bytes},
      {"allreduces_timed", count},
      {"warmup_per_repeat", warmup},
      {"iters_per_repeat", iters},
      {"repeats", repeats},
      {"median_ms", Round(median, 3)},
      {"p90_ms", Round(ms[(9 * count) / 10], 3)},
      {"p10_ms", Round(ms[count / 10], 3)},
      {"mean_ms", Round(mean, 3)},
      {"min_ms", Round(ms.front(), 3)},
      {"max_ms", Round(ms.back(), 3)},
      {"per_repeat_median_ms", per_repeat},
      {"MB_per_s", Round(static_cast<double>(bytes) / (median * 1e-3) / 1e6, 1)},
      {"conditions",
       "2 ranks in one process, one thread each, Gloo TCP on 127.0.0.1 (full mesh), ring "
       "all-reduce sum in place; per iteration: refill, barrier, then time AllReduceSum, the "
       "slower rank's time; MB/s = bytes / median (1 MB = 1e6 B)"},
  };
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) {
    std::ofstream f(out);
    f << text << "\n";
    if (!f) return Fail("cannot write " + out);
  }
  return 0;
}
