// Integration: the real ps_server daemon. A sync step through gRPC with the
// token, a checkpoint, a kill -9, a restart on the same address, a restore
// that brings back exactly the checkpointed state, and the Prometheus port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/parameter_server.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "ps-server-integration-token-0123456789";

std::string HttpGet(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (int i = 0; i < 10000; ++i) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        out.append(buf, n);
      }
    }
  }
  close(fd);
  return out;
}

class PsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ps_server");
    WriteFile(dir_ + "/token", kToken);
    // A port that is not one of the cluster's.
    for (int i = 0; i < 20 && metrics_port_ == 0; ++i) {
      const int port = PickFreePort();
      if (spec_.TfConfig(cluster::TaskType::kPs, 0).find(absl::StrCat(":", port, "\"")) ==
          std::string::npos) {
        metrics_port_ = port;
      }
    }
    ASSERT_NE(metrics_port_, 0);
  }

  void StartServer() {
    auto d = Daemon::Start(
        "ps_server", spec_.TfConfig(cluster::TaskType::kPs, 0),
        {"--auth_token_file=" + dir_ + "/token", absl::StrCat("--metrics_port=", metrics_port_)},
        dir_);
    ASSERT_TRUE(d.ok());
    server_ = *std::move(d);
    rpc::SecurityOptions security{.token = kToken};
    ASSERT_TRUE(
        WaitForServing(spec_.Address(cluster::TaskType::kPs, 0), security, absl::Seconds(30)).ok())
        << server_->Log();
    stub_ = proto::ParameterServer::NewStub(
        rpc::CreateChannel(spec_.Address(cluster::TaskType::kPs, 0), {}));
    proto::ConfigureRequest config;
    config.set_num_shards(1);
    config.set_num_workers(2);
    config.mutable_policy()->set_mode(proto::MODE_SYNC);
    config.mutable_optimizer()->set_kind(proto::OptimizerConfig::MOMENTUM);
    proto::ConfigureResponse cr;
    grpc::Status s = stub_->Configure(Context().get(), config, &cr);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto c = std::make_unique<grpc::ClientContext>();
    rpc::PrepareContext(c.get(), {.token = kToken}, absl::Seconds(30));
    return c;
  }

  proto::PushRequest Push(int worker, int64_t step, float g) {
    proto::PushRequest p;
    p.mutable_id()->set_worker(worker);
    p.mutable_id()->set_step(step);
    p.set_computed_on_version(step);
    auto* t = p.add_gradients();
    t->set_name("dense/kernel");
    tensor::SetFloatTensor({64, 32}, std::vector<float>(64 * 32, g), t->mutable_tensor());
    return p;
  }

  proto::PullResponse PullAll() {
    proto::PullResponse r;
    grpc::Status s = stub_->Pull(Context().get(), {}, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  std::string dir_;
  int metrics_port_ = 0;
  ClusterSpec spec_{1, 2};
  std::unique_ptr<Daemon> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(PsServerTest, SyncStepsCheckpointKillRestartRestore) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  proto::CreateVariablesRequest create;
  auto* v = create.add_variables();
  v->set_name("dense/kernel");
  tensor::SetFloatTensor({64, 32}, std::vector<float>(64 * 32, 0.5f), v->mutable_tensor());
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(stub_->CreateVariables(Context().get(), create, &created).ok());

  proto::PushResponse r;
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(stub_->Push(Context().get(), Push(0, step, 1.0f), &r).ok());
    proto::PushRequest last = Push(1, step, 2.0f);
    last.set_pull_after(true);
    last.set_pull_min_version(step + 1);
    ASSERT_TRUE(stub_->Push(Context().get(), last, &r).ok());
    EXPECT_EQ(r.version(), step + 1);
    ASSERT_EQ(r.variables_size(), 1);
  }
  proto::SaveCheckpointRequest save;
  save.set_directory(dir_ + "/ckpt");
  save.set_step(3);
  proto::SaveCheckpointResponse saved;
  ASSERT_TRUE(stub_->SaveCheckpoint(Context().get(), save, &saved).ok());
  const proto::PullResponse at_checkpoint = PullAll();
  EXPECT_EQ(at_checkpoint.version(), 3);

  // Prometheus sees the same counters.
  const std::string metrics = HttpGet(metrics_port_);
  EXPECT_THAT(metrics, HasSubstr("pscluster_ps_version{shard=\"0\"} 3"));
  EXPECT_THAT(metrics, HasSubstr("pscluster_ps_gradients_applied_total{shard=\"0\"} 6"));

  // One more step, then the server dies.
  ASSERT_TRUE(stub_->Push(Context().get(), Push(0, 3, 1.0f), &r).ok());
  ASSERT_TRUE(stub_->Push(Context().get(), Push(1, 3, 1.0f), &r).ok());
  server_->process().Signal(SIGKILL);
  ASSERT_TRUE(server_->process().Wait(absl::Seconds(30)).ok());

  ASSERT_NO_FATAL_FAILURE(StartServer());
  proto::RestoreCheckpointRequest restore;
  restore.set_directory(dir_ + "/ckpt");
  restore.set_step(-1);
  proto::RestoreCheckpointResponse restored;
  grpc::Status s = stub_->RestoreCheckpoint(Context().get(), restore, &restored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(restored.step(), 3);
  const proto::PullResponse after = PullAll();
  EXPECT_EQ(after.SerializeAsString(), at_checkpoint.SerializeAsString());
  // Step 3 is redone and applied (its pushes came after the checkpoint).
  ASSERT_TRUE(stub_->Push(Context().get(), Push(0, 3, 1.0f), &r).ok());
  ASSERT_TRUE(stub_->Push(Context().get(), Push(1, 3, 1.0f), &r).ok());
  EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(r.version(), 4);
  proto::ShardStats stats;
  ASSERT_TRUE(stub_->GetStats(Context().get(), {}, &stats).ok());
  EXPECT_EQ(stats.pushes_accepted(), 2);
  EXPECT_EQ(stats.gradients_applied(), 2);
}

TEST(PsServerFlagsTest, BadValuesExitTwo) {
  ClusterSpec spec(1, 1);
  for (const std::string& flag :
       {std::string("--max_request_mb=0"), std::string("--keep_checkpoints=0"),
        std::string("--metrics_port=70000"), std::string("--max_pull_wait=0s"),
        std::string("--data_port=-1"), std::string("--data_port=65536")}) {
    auto r =
        RunProgram({BinPath("ps_server"), flag},
                   {{"TF_CONFIG", spec.TfConfig(cluster::TaskType::kPs, 0)}}, absl::Seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit.ToString(), "exit 2") << flag;
    EXPECT_THAT(r->err, HasSubstr(flag.substr(0, flag.find('='))));
  }
}

}  // namespace
}  // namespace testing
}  // namespace psc
