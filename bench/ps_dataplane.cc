// bench/ps_dataplane: the data plane's figure of merit (DESIGN.md).
//
// One worker pushes the reference model's gradients and pulls its
// parameters back (435,306 float32 = 1,741,224 bytes each way) through real
// ps_server processes on 127.0.0.1, with the workers' own client (one
// combined push(pull_after) per shard, all shards concurrently): through 1, 2
// and 4 shards over the data channel, and through 1 and 2 over gRPC alone.
// Then N concurrent workers (default 8) against 1 and 2 shards: p50/p99
// round trip and aggregate GB/s. In the same
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
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/base/malloc_tuning.h"
#include "common/base/status_macros.h"
#include "common/cluster/auth_token.h"
#include "common/compute/model_shapes.h"
#include "common/placement/placement.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/rpc/security.h"
#include "common/tensor/tensor.h"
#include "launcher/free_port.h"
#include "launcher/subprocess.h"
#include "launcher/test_certificates.h"
#include "nlohmann/json.hpp"
#include "proto/parameter_server.grpc.pb.h"

ABSL_FLAG(int, warmup, 20, "Warm-up round trips per repeat.");
ABSL_FLAG(int, iters, 200, "Timed round trips per repeat.");
ABSL_FLAG(int, repeats, 3, "Repeats; the median is over all timed round trips.");
ABSL_FLAG(std::string, out, "", "Also write the JSON here.");
ABSL_FLAG(int, concurrent_workers, 8, "Workers of the concurrent measurement.");
ABSL_FLAG(bool, tls, false,
          "Measure TLS instead: one worker and 1 shard over the data channel in plaintext, "
          "over the data channel in TLS, and over gRPC in TLS (the same throwaway certificates "
          "for every daemon), repeats interleaved; prints tls_ratio_vs_plaintext.");

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

std::string OwnDirectory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// `num_shards` ps_server processes in async mode with seed_cnn placed on
// them, ready for pushes from up to `num_workers` workers.
struct Cluster {
  std::vector<std::unique_ptr<psc::launcher::Subprocess>> processes;
  std::vector<std::string> addresses;
  std::vector<std::vector<psc::tensor::VariableShape>> per_shard;
  ~Cluster() {
    for (auto& p : processes) p->Stop(absl::Seconds(10));
  }
};

// Why a cluster call failed: `s`, with how a server that has already ended
// ended and the last line of its log (for example "cannot listen on ...").
absl::Status WithServerExits(const absl::Status& s, Cluster& cluster,
                             const std::vector<std::string>& logs) {
  std::string why(s.message());
  for (size_t i = 0; i < cluster.processes.size(); ++i) {
    std::optional<psc::launcher::ExitInfo> exit = cluster.processes[i]->Poll();
    if (!exit.has_value()) continue;
    std::ifstream in(logs[i]);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    absl::StrAppend(&why, "; ps:", i, " ended (", exit->ToString(), "): ", last);
  }
  return absl::Status(s.code(), why);
}

// Server logs go to `dir`.
// `server_flags`: the token (and TLS) flags of every ps_server.
absl::StatusOr<std::unique_ptr<Cluster>> StartCluster(int num_shards, int num_workers,
                                                      const std::vector<std::string>& server_flags,
                                                      const psc::rpc::SecurityOptions& security,
                                                      const std::string& dir) {
  auto cluster = std::make_unique<Cluster>();
  std::vector<std::string> logs;
  Json spec;
  PSC_ASSIGN_OR_RETURN(auto ports, psc::launcher::PickFreeLoopbackPorts(num_shards + 1));
  for (int i = 0; i < num_shards; ++i) {
    cluster->addresses.push_back(absl::StrCat("127.0.0.1:", ports[i]));
    spec["ps"].push_back(cluster->addresses.back());
  }
  spec["worker"].push_back(absl::StrCat("127.0.0.1:", ports[num_shards]));
  PSC_ASSIGN_OR_RETURN(auto placement, psc::placement::PlaceVariables(
                                           psc::compute::SeedCnnVariableShapes(), {num_shards}));
  cluster->per_shard = psc::placement::ShardVariables(placement);
  for (int i = 0; i < num_shards; ++i) {
    psc::launcher::SubprocessOptions o;
    o.argv = {OwnDirectory() + "/ps_server"};
    o.argv.insert(o.argv.end(), server_flags.begin(), server_flags.end());
    o.env = {
        {"TF_CONFIG", Json{{"cluster", spec}, {"task", {{"type", "ps"}, {"index", i}}}}.dump()}};
    static int started = 0;
    logs.push_back(absl::StrCat(dir, "/ps-", started++, ".log"));
    o.stdout_path = logs.back();
    o.stderr_path = "=stdout";
    PSC_ASSIGN_OR_RETURN(auto p, psc::launcher::Subprocess::Spawn(o));
    cluster->processes.push_back(std::move(p));
  }
  psc::rpc::GrpcParameterClient client(cluster->addresses, security, absl::Seconds(30));
  for (int i = 0; i < num_shards; ++i) {
    psc::proto::ConfigureRequest config;
    config.set_shard_index(i);
    config.set_num_shards(num_shards);
    config.set_num_workers(num_workers);
    config.mutable_policy()->set_mode(psc::proto::MODE_ASYNC);
    config.mutable_optimizer()->set_kind(psc::proto::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(1e-6);
    psc::proto::CreateVariablesRequest create;
    for (const psc::tensor::VariableShape& v : cluster->per_shard[i]) {
      auto* t = create.add_variables();
      t->set_name(v.name);
      psc::tensor::SetFloatTensor(v.shape,
                                  std::vector<float>(psc::tensor::NumElements(v.shape), 0.01f),
                                  t->mutable_tensor());
    }
    if (absl::Status s = client.Configure(i, config); !s.ok()) {
      return WithServerExits(s, *cluster, logs);
    }
    if (absl::Status s = client.CreateVariables(i, create); !s.ok()) {
      return WithServerExits(s, *cluster, logs);
    }
  }
  return cluster;
}

// One push(pull_after) request per shard, as worker `worker` sends them.
std::vector<psc::proto::PushRequest> MakePushes(const Cluster& cluster, int worker) {
  std::vector<psc::proto::PushRequest> pushes(cluster.per_shard.size());
  for (size_t i = 0; i < pushes.size(); ++i) {
    pushes[i].mutable_id()->set_worker(worker);
    pushes[i].set_pull_after(true);
    for (const psc::tensor::VariableShape& v : cluster.per_shard[i]) {
      auto* g = pushes[i].add_gradients();
      g->set_name(v.name);
      psc::tensor::SetFloatTensor(v.shape,
                                  std::vector<float>(psc::tensor::NumElements(v.shape), 0.001f),
                                  g->mutable_tensor());
    }
  }
  return pushes;
}

// Round trips of one worker: PushAll of every shard's push(pull_after), as
// the workers send them (GrpcParameterClient, all shards concurrently).
// Appends each timed round trip's microseconds to `us`.
absl::Status RoundTrips(psc::rpc::GrpcParameterClient* client,
                        std::vector<psc::proto::PushRequest>* pushes, int64_t* step, int warmup,
                        int iters, std::vector<double>* us) {
  std::vector<psc::proto::PushResponse> responses;
  for (int i = 0; i < warmup + iters; ++i, ++*step) {
    for (auto& p : *pushes) p.mutable_id()->set_step(*step);
    const double t0 = NowUs();
    PSC_RETURN_IF_ERROR(client->PushAll(*pushes, &responses, absl::Seconds(30)));
    const double elapsed = NowUs() - t0;
    int64_t pulled = 0;
    for (const auto& r : responses) {
      for (const auto& v : r.variables()) pulled += v.tensor().data().size();
    }
    if (pulled != kParams * 4) {
      return absl::InternalError(absl::StrCat("pulled ", pulled, " bytes, want ", kParams * 4));
    }
    if (i >= warmup) us->push_back(elapsed);
  }
  return absl::OkStatus();
}

// One worker against `num_shards` servers.
absl::StatusOr<Json> MeasureOneWorker(int num_shards, bool data_channel, int warmup, int iters,
                                      int repeats, const std::vector<std::string>& server_flags,
                                      const psc::rpc::SecurityOptions& security,
                                      const std::string& dir) {
  PSC_ASSIGN_OR_RETURN(auto cluster, StartCluster(num_shards, 1, server_flags, security, dir));
  psc::rpc::GrpcParameterClient client(cluster->addresses, security, absl::Seconds(30),
                                       data_channel);
  auto pushes = MakePushes(*cluster, 0);
  std::vector<double> us;
  int64_t step = 0;
  for (int r = 0; r < repeats; ++r) {
    PSC_RETURN_IF_ERROR(RoundTrips(&client, &pushes, &step, warmup, iters, &us));
  }
  if (data_channel != (client.data_channel_calls() > 0)) {
    return absl::InternalError(absl::StrCat("data_channel=", data_channel, " but ",
                                            client.data_channel_calls(), " data-channel calls"));
  }
  Json out = Summary(us);
  out["shards"] = num_shards;
  out["transport"] =
      absl::StrCat(data_channel ? "data channel" : "gRPC", security.tls ? " in TLS" : "");
  return out;
}

// `workers` concurrent workers (threads with their own clients) against
// `num_shards` servers: per-round-trip latency and aggregate bytes moved.
absl::StatusOr<Json> MeasureConcurrent(int num_shards, int workers, int warmup, int iters,
                                       const std::vector<std::string>& server_flags,
                                       const psc::rpc::SecurityOptions& security,
                                       const std::string& dir) {
  PSC_ASSIGN_OR_RETURN(auto cluster,
                       StartCluster(num_shards, workers, server_flags, security, dir));
  std::vector<std::vector<double>> us(workers);
  std::vector<absl::Status> statuses(workers);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  absl::Notification go;
  double t0 = 0;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      psc::rpc::GrpcParameterClient client(cluster->addresses, security, absl::Seconds(30));
      auto pushes = MakePushes(*cluster, w);
      int64_t step = 0;
      std::vector<double> ignored;
      statuses[w] = RoundTrips(&client, &pushes, &step, warmup, 0, &ignored);
      ++ready;
      go.WaitForNotification();
      if (statuses[w].ok()) statuses[w] = RoundTrips(&client, &pushes, &step, 0, iters, &us[w]);
    });
  }
  while (ready.load() < workers) absl::SleepFor(absl::Milliseconds(1));
  t0 = NowUs();
  go.Notify();
  for (auto& t : threads) t.join();
  const double wall_us = NowUs() - t0;
  std::vector<double> all;
  for (int w = 0; w < workers; ++w) {
    if (!statuses[w].ok()) return statuses[w];
    all.insert(all.end(), us[w].begin(), us[w].end());
  }
  std::sort(all.begin(), all.end());
  const double bytes = 2.0 * kParams * 4 * all.size();
  auto r1 = [](double x) { return std::round(x * 10) / 10; };
  return Json{{"workers", workers},
              {"shards", num_shards},
              {"round_trips", all.size()},
              {"p50_us", r1(all[all.size() / 2])},
              {"p99_us", r1(all[std::min(all.size() - 1, (99 * all.size()) / 100)])},
              {"aggregate_GB_per_s", std::round(bytes / wall_us / 1e3 * 1000) / 1000}};
}

}  // namespace

// --tls: the data channel with and without TLS, and gRPC with TLS, one
// worker against 1 shard; the repeats of the three are interleaved so that
// the machine's drift hits them alike.
int MeasureTls(int warmup, int iters, int repeats, const std::string& dir,
               const std::string& token_file, const psc::rpc::SecurityOptions& plain) {
  if (absl::Status s = psc::launcher::MakeTestCertificates(dir); !s.ok()) {
    std::fprintf(stderr, "ps_dataplane: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto tls = psc::rpc::LoadSecurityOptions(token_file, dir + "/node.pem", dir + "/node.key",
                                           dir + "/ca.pem");
  if (!tls.ok()) {
    std::fprintf(stderr, "ps_dataplane: %s\n", std::string(tls.status().message()).c_str());
    return 1;
  }
  const std::vector<std::string> plain_flags = {"--auth_token_file=" + token_file};
  std::vector<std::string> tls_flags = plain_flags;
  for (const char* f : {"--tls_cert=node.pem", "--tls_key=node.key", "--tls_ca=ca.pem"}) {
    const std::string flag = f;
    const size_t eq = flag.find('=');
    tls_flags.push_back(flag.substr(0, eq + 1) + dir + "/" + flag.substr(eq + 1));
  }
  struct Config {
    const char* key;
    bool data_channel;
    const std::vector<std::string>* flags;
    const psc::rpc::SecurityOptions* security;
  };
  const Config configs[] = {{"data_channel_plaintext", true, &plain_flags, &plain},
                            {"data_channel_tls", true, &tls_flags, &*tls},
                            {"grpc_tls", false, &tls_flags, &*tls}};
  Json result = {{"bench", "ps_dataplane --tls"}, {"bytes_each_way", kParams * 4}};
  std::map<std::string, std::vector<double>> medians;
  for (int r = 0; r < repeats; ++r) {
    for (const Config& c : configs) {
      auto m = MeasureOneWorker(1, c.data_channel, warmup, iters, 1, *c.flags, *c.security, dir);
      if (!m.ok()) {
        std::fprintf(stderr, "ps_dataplane: %s: %s\n", c.key,
                     std::string(m.status().message()).c_str());
        return 1;
      }
      medians[c.key].push_back((*m)["median_us"].get<double>());
      result[c.key]["transport"] = (*m)["transport"];
    }
  }
  for (auto& [key, values] : medians) {
    result[key]["repeat_medians_us"] = values;
    std::sort(values.begin(), values.end());
    result[key]["median_us"] = values[values.size() / 2];
  }
  auto median = [&](const char* key) { return result[key]["median_us"].get<double>(); };
  result["tls_ratio_vs_plaintext"] =
      std::round(1000 * median("data_channel_tls") / median("data_channel_plaintext")) / 1000;
  result["tls_data_channel_vs_tls_grpc"] =
      std::round(1000 * median("data_channel_tls") / median("grpc_tls")) / 1000;
  result["conditions"] = {{"warmup_per_repeat", warmup},
                          {"iters_per_repeat", iters},
                          {"repeats", repeats},
                          {"certificates", "EC P-256, one CA; mutual TLS"},
                          {"nproc", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))}};
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  psc::base::KeepLargeBuffersOnTheHeap();  // as the daemons do
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
  auto token = psc::cluster::GenerateAuthToken();
  std::ofstream(token_file) << *token << "\n";
  psc::rpc::SecurityOptions security;
  security.token = *token;
  if (absl::GetFlag(FLAGS_tls)) {
    const int rc = MeasureTls(warmup, iters, repeats, dir, token_file, security);
    std::filesystem::remove_all(dir);
    return rc;
  }
  const std::vector<std::string> server_flags = {"--auth_token_file=" + token_file};

  Json result = {
      {"bench", "ps_dataplane"}, {"bytes_each_way", bytes}, {"params", kParams}, {"tcp", *tcp}};
  auto fail = [&](const std::string& what, const absl::Status& s) {
    std::fprintf(stderr, "ps_dataplane: %s: %s\n", what.c_str(), std::string(s.message()).c_str());
    std::filesystem::remove_all(dir);
    return 1;
  };
  struct Config {
    const char* key;
    int shards;
    bool data_channel;
  };
  for (const Config& c :
       {Config{"pscluster_1_shard", 1, true}, Config{"pscluster_2_shards", 2, true},
        Config{"pscluster_4_shards", 4, true}, Config{"grpc_1_shard", 1, false},
        Config{"grpc_2_shards", 2, false}}) {
    auto r = MeasureOneWorker(c.shards, c.data_channel, warmup, iters, repeats, server_flags,
                              security, dir);
    if (!r.ok()) return fail(c.key, r.status());
    result[c.key] = *r;
  }
  const int workers = absl::GetFlag(FLAGS_concurrent_workers);
  for (int shards : {1, 2}) {
    auto r = MeasureConcurrent(shards, workers, std::min(warmup, 5), std::max(iters / 4, 1),
                               server_flags, security, dir);
    if (!r.ok()) return fail(absl::StrCat(workers, " workers"), r.status());
    result["concurrent"].push_back(*r);
  }
  std::filesystem::remove_all(dir);
  const double tcp_us = result["tcp"]["median_us"].get<double>();
  auto ratio = [&](const char* key) {
    return std::round(100 * result[key]["median_us"].get<double>() / tcp_us) / 100;
  };
  result["time_ratio_vs_tcp"] = ratio("pscluster_1_shard");
  result["time_ratio_vs_tcp_2_shards"] = ratio("pscluster_2_shards");
  result["time_ratio_vs_tcp_4_shards"] = ratio("pscluster_4_shards");
  result["time_ratio_vs_tcp_grpc"] = ratio("grpc_1_shard");
  result["time_ratio_vs_tcp_grpc_2_shards"] = ratio("grpc_2_shards");
  result["GB_per_s_both_directions_1_shard"] =
      std::round(2.0 * bytes / result["pscluster_1_shard"]["median_us"].get<double>() / 1e3 *
                 1000) /
      1000;
  result["GB_per_s_both_directions_tcp"] = std::round(2.0 * bytes / tcp_us / 1e3 * 1000) / 1000;
  result["conditions"] = {
      {"warmup_per_repeat", warmup},
      {"iters_per_repeat", iters},
      {"repeats", repeats},
      {"transport",
       "pscluster_*: the workers' client (GrpcParameterClient::PushAll of Push(pull_after), all "
       "shards concurrently) over the data channel (gRPC-negotiated TCP, ticket); grpc_*: the same "
       "over gRPC 1.51 unary calls; plaintext, token, 127.0.0.1"},
      {"server_work", "validation, exactly-once check, SGD apply (async mode)"},
      {"tcp_peer", "2 processes, blocking read/write, TCP_NODELAY, buffers reused"},
      {"concurrent",
       "N worker threads, own clients, after warm-up; warmup min(warmup,5), "
       "iters/4 round trips each"},
      {"nproc", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))}};
  const std::string text = result.dump();
  std::printf("%s\n", text.c_str());
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << text << "\n";
  return 0;
}
