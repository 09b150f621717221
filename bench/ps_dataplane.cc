// bench/ps_dataplane: the data plane's figure of merit (DESIGN.md).
//
// One worker pushes the reference model's gradients and pulls its
// parameters back (435,306 float32 = 1,741,224 bytes each way) through real
// ps_server processes on 127.0.0.1: once through 1 shard, once through 2
// (one combined Push(pull_after) RPC per shard, concurrently). In the same
// run it times a raw TCP round trip of the same bytes between two processes
// (the peer of ../shared/anchors/tcp_roundtrip.c: blocking read/write,
// TCP_NODELAY, buffers reused). Each figure is the median over
// repeats x iters timed round trips after warm-up.
//
// Prints one JSON object; `time_ratio_vs_tcp` = 1-shard time / TCP time
// (lower is better). The pscluster round trip includes what the server does
// for real: validation, the exactly-once check and an SGD apply (async mode).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/auth_token.h"
#include "common/free_port.h"
#include "common/model_shapes.h"
#include "common/placement.h"
#include "common/rpc/channel.h"
#include "common/subprocess.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"
#include "proto/parameter_server.grpc.pb.h"

ABSL_FLAG(int, warmup, 20, "Warm-up round trips per repeat.");
ABSL_FLAG(int, iters, 200, "Timed round trips per repeat.");
ABSL_FLAG(int, repeats, 3, "Repeats; the median is over all timed round trips.");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");

namespace {

using Json = nlohmann::json;

constexpr int64_t kParams = 435306;

Json Summary(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  const double mean = std::accumulate(us.begin(), us.end(), 0.0) / n;
  auto r1 = [](double x) { return std::round(x * 10) / 10; };
  return {{"median_us", r1(us[n / 2])},     {"mean_us", r1(mean)},      {"p10_us", r1(us[n / 10])},
          {"p90_us", r1(us[(9 * n) / 10])}, {"min_us", r1(us.front())}, {"max_us", r1(us.back())},
          {"round_trips_timed", n}};
}

double NowUs() { return absl::ToDoubleMicroseconds(absl::Now() - absl::UnixEpoch()); }

// ---- raw TCP peer ------------------------------------------------------------

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// 0 ok, 1 clean EOF, -1 error.
int ReadAll(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, p + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) return got == 0 ? 1 : -1;
    got += static_cast<size_t>(k);
  }
  return 0;
}

// Forks an echo-style server (read the push, send the pull) and measures the
// round trips from this process. Must run before gRPC starts any thread.
absl::StatusOr<Json> MeasureTcp(size_t bytes, int warmup, int iters, int repeats) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(lfd, 1) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError("tcp: cannot listen on 127.0.0.1");
  }
  int one = 1;
  pid_t child = fork();
  if (child < 0) return absl::InternalError("tcp: fork failed");
  if (child == 0) {
    int fd = accept(lfd, nullptr, nullptr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> in(bytes), out(bytes, 0x5a);
    for (;;) {
      int r = ReadAll(fd, in.data(), bytes);
      if (r != 0) _exit(r == 1 ? 0 : 1);
      if (!WriteAll(fd, out.data(), bytes)) _exit(1);
    }
  }
  close(lfd);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::InternalError("tcp: cannot connect");
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> push(bytes, static_cast<char>(0xa5)), pull(bytes);
  std::vector<double> us;
  for (int r = 0; r < repeats; ++r) {
    for (int i = 0; i < warmup + iters; ++i) {
      const double t0 = NowUs();
      if (!WriteAll(fd, push.data(), bytes) || ReadAll(fd, pull.data(), bytes) != 0) {
        return absl::InternalError("tcp: round trip failed");
      }
      if (i >= warmup) us.push_back(NowUs() - t0);
    }
  }
  close(fd);
  int status = 0;
  waitpid(child, &status, 0);
  if (pull[0] != 0x5a) return absl::InternalError("tcp: pulled bytes are wrong");
  return Summary(us);
}

// ---- pscluster ---------------------------------------------------------------

struct ShardClient {
  std::unique_ptr<psc::proto::ParameterServer::Stub> stub;
  psc::proto::PushRequest push;
  std::unique_ptr<psc::Subprocess> process;
};

std::string OwnDirectory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// Starts `num_shards` ps_server processes, places seed_cnn on them, and
// times Push(pull_after) round trips to all shards at once.
absl::StatusOr<Json> MeasurePscluster(int num_shards, int warmup, int iters, int repeats,
                                      const std::string& token_file,
                                      const psc::SecurityOptions& security) {
  Json cluster;
  for (int i = 0; i < num_shards; ++i) {
    auto port = psc::PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    cluster["ps"].push_back(absl::StrCat("127.0.0.1:", *port));
  }
  auto worker_port = psc::PickFreeLoopbackPort();
  if (!worker_port.ok()) return worker_port.status();
  cluster["worker"].push_back(absl::StrCat("127.0.0.1:", *worker_port));

  auto placement = psc::PlaceVariables(psc::SeedCnnVariableShapes(), {num_shards});
  if (!placement.ok()) return placement.status();
  const auto per_shard = psc::ShardVariables(*placement);

  std::vector<ShardClient> shards(num_shards);
  for (int i = 0; i < num_shards; ++i) {
    psc::SubprocessOptions o;
    o.argv = {OwnDirectory() + "/ps_server", "--auth_token_file=" + token_file};
    o.env = {
        {"TF_CONFIG", Json{{"cluster", cluster}, {"task", {{"type", "ps"}, {"index", i}}}}.dump()}};
    o.stdout_path = "/dev/null";
    o.stderr_path = "/dev/null";
    auto p = psc::Subprocess::Spawn(o);
    if (!p.ok()) return p.status();
    shards[i].process = *std::move(p);
    auto channel = psc::CreateChannel(cluster["ps"][i].get<std::string>(), security);
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(30)))) {
      return absl::UnavailableError(absl::StrCat("ps_server ", i, " did not come up"));
    }
    shards[i].stub = psc::proto::ParameterServer::NewStub(channel);

    psc::proto::ConfigureRequest config;
    config.set_shard_index(i);
    config.set_num_shards(num_shards);
    config.set_num_workers(1);
    config.mutable_policy()->set_mode(psc::proto::MODE_ASYNC);
    config.mutable_optimizer()->set_kind(psc::proto::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(1e-6);
    psc::proto::CreateVariablesRequest create;
    for (const psc::VariableShape& v : per_shard[i]) {
      auto* t = create.add_variables();
      t->set_name(v.name);
      const int64_t n = psc::NumElements(v.shape);
      psc::SetFloatTensor(v.shape, std::vector<float>(n, 0.01f), t->mutable_tensor());
      auto* g = shards[i].push.add_gradients();
      g->set_name(v.name);
      psc::SetFloatTensor(v.shape, std::vector<float>(n, 0.001f), g->mutable_tensor());
    }
    shards[i].push.set_pull_after(true);
    grpc::ClientContext c1, c2;
    psc::PrepareContext(&c1, security, absl::Seconds(30));
    psc::PrepareContext(&c2, security, absl::Seconds(30));
    psc::proto::ConfigureResponse cr;
    psc::proto::CreateVariablesResponse vr;
    grpc::Status s = shards[i].stub->Configure(&c1, config, &cr);
    if (s.ok()) s = shards[i].stub->CreateVariables(&c2, create, &vr);
    if (!s.ok()) return absl::InternalError("setting up shard failed: " + s.error_message());
  }

  std::vector<double> us;
  int64_t step = 0;
  int64_t pulled_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    for (int i = 0; i < warmup + iters; ++i, ++step) {
      std::vector<grpc::ClientContext> contexts(num_shards);
      std::vector<psc::proto::PushResponse> responses(num_shards);
      std::vector<grpc::Status> statuses(num_shards);
      std::atomic<int> left{num_shards};
      absl::Notification done;
      const double t0 = NowUs();
      for (int k = 0; k < num_shards; ++k) {
        psc::PrepareContext(&contexts[k], security, absl::Seconds(30));
        shards[k].push.mutable_id()->set_step(step);
        shards[k].stub->async()->Push(&contexts[k], &shards[k].push, &responses[k],
                                      [&, k](grpc::Status s) {
                                        statuses[k] = std::move(s);
                                        if (--left == 0) done.Notify();
                                      });
      }
      done.WaitForNotification();
      const double elapsed = NowUs() - t0;
      pulled_bytes = 0;
      for (int k = 0; k < num_shards; ++k) {
        if (!statuses[k].ok())
          return absl::InternalError("push failed: " + statuses[k].error_message());
        for (const auto& v : responses[k].variables()) pulled_bytes += v.tensor().data().size();
      }
      if (i >= warmup) us.push_back(elapsed);
    }
  }
  for (auto& s : shards) s.process->Stop(absl::Seconds(10));
  if (pulled_bytes != kParams * 4) {
    return absl::InternalError(absl::StrCat("pulled ", pulled_bytes, " bytes, want ", kParams * 4));
  }
  Json out = Summary(us);
  out["shards"] = num_shards;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int warmup = absl::GetFlag(FLAGS_warmup), iters = absl::GetFlag(FLAGS_iters),
            repeats = absl::GetFlag(FLAGS_repeats);
  if (warmup < 0 || iters < 1 || repeats < 1) {
    std::fprintf(stderr, "ps_dataplane: need --warmup >= 0, --iters >= 1, --repeats >= 1\n");
    return 2;
  }
  const size_t bytes = kParams * sizeof(float);
  // The TCP peer forks, so it runs before gRPC starts threads.
  auto tcp = MeasureTcp(bytes, warmup, iters, repeats);
  if (!tcp.ok()) {
    std::fprintf(stderr, "ps_dataplane: %s\n", std::string(tcp.status().message()).c_str());
    return 1;
  }
  std::string dir = (std::filesystem::temp_directory_path() / "ps_dataplane-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  const std::string token_file = dir + "/token";
  auto token = psc::GenerateAuthToken();
  std::ofstream(token_file) << *token << "\n";
  psc::SecurityOptions security;
  security.token = *token;

  Json result = {
      {"bench", "ps_dataplane"}, {"bytes_each_way", bytes}, {"params", kParams}, {"tcp", *tcp}};
  for (int shards : {1, 2}) {
    auto r = MeasurePscluster(shards, warmup, iters, repeats, token_file, security);
    if (!r.ok()) {
      std::fprintf(stderr, "ps_dataplane: %d shard(s): %s\n", shards,
                   std::string(r.status().message()).c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    result[shards == 1 ? "pscluster_1_shard" : "pscluster_2_shards"] = *r;
  }
  std::filesystem::remove_all(dir);
  const double tcp_us = result["tcp"]["median_us"].get<double>();
  auto ratio = [&](const char* key) {
    return std::round(100 * result[key]["median_us"].get<double>() / tcp_us) / 100;
  };
  result["time_ratio_vs_tcp"] = ratio("pscluster_1_shard");
  result["time_ratio_vs_tcp_2_shards"] = ratio("pscluster_2_shards");
  result["GB_per_s_both_directions_1_shard"] =
      std::round(2.0 * bytes / result["pscluster_1_shard"]["median_us"].get<double>() / 1e3 *
                 1000) /
      1000;
  result["GB_per_s_both_directions_tcp"] = std::round(2.0 * bytes / tcp_us / 1e3 * 1000) / 1000;
  result["conditions"] = {
      {"warmup_per_repeat", warmup},
      {"iters_per_repeat", iters},
      {"repeats", repeats},
      {"transport", "gRPC 1.51 unary Push(pull_after) per shard, plaintext, token, 127.0.0.1"},
      {"server_work", "validation, exactly-once check, SGD apply (async mode)"},
      {"tcp_peer", "2 processes, blocking read/write, TCP_NODELAY, buffers reused"},
      {"nproc", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))}};
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}
