// Integration: the data channel between GrpcParameterClient and a real
// ps_server process. The same pushes and pulls over the data channel and over
// gRPC give the same answers bit for bit; a server without a data channel is
// reached over gRPC; a killed and restarted server is reached again (the
// connection is renegotiated); CancelAll ends a waiting call.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/socket_stream.h"
#include "common/data_channel/testing/raw_client.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/parameter_server.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "data-channel-integration-token-0123456789";

class PsDataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ps_data_channel");
    WriteFile(dir_ + "/token", kToken);
  }
  void TearDown() override {
    if (server_) server_->process().Stop(absl::Seconds(10));
  }

  void StartServer(std::vector<std::string> flags = {}) {
    flags.push_back("--auth_token_file=" + dir_ + "/token");
    auto d = Daemon::Start("ps_server", spec_.TfConfig(cluster::TaskType::kPs, 0), flags, dir_);
    ASSERT_TRUE(d.ok());
    server_ = *std::move(d);
    ASSERT_TRUE(WaitForServing(address(), security(), absl::Seconds(30)).ok()) << server_->Log();
  }

  std::string address() const { return spec_.Address(cluster::TaskType::kPs, 0); }
  static rpc::SecurityOptions security() { return rpc::SecurityOptions{.token = kToken}; }

  // mode: async (every push applied at once) or sync with 2 replicas.
  void Configure(ps_client::ParameterClient* client, proto::TrainingMode mode,
                 proto::DataType wire = proto::DT_FLOAT32) {
    proto::ConfigureRequest config;
    config.mutable_policy()->set_wire_dtype(wire);
    config.set_num_shards(1);
    config.set_num_workers(2);
    config.mutable_policy()->set_mode(mode);
    config.mutable_policy()->set_replicas_to_aggregate(2);
    config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(0.5);
    ASSERT_TRUE(client->Configure(0, config).ok());
    proto::CreateVariablesRequest create;
    auto* w = create.add_variables();
    w->set_name("w");
    std::vector<float> init(3000);
    for (size_t i = 0; i < init.size(); ++i) init[i] = 0.001f * static_cast<float>(i);
    tensor::SetFloatTensor({1000, 3}, init, w->mutable_tensor());
    auto* b = create.add_variables();
    b->set_name("b");
    tensor::SetFloatTensor({3}, std::vector<float>{1, 2, 3}, b->mutable_tensor());
    ASSERT_TRUE(client->CreateVariables(0, create).ok());
  }

  static proto::PushRequest Push(int worker, int64_t step, int64_t version, float scale) {
    proto::PushRequest push;
    push.mutable_id()->set_worker(worker);
    push.mutable_id()->set_step(step);
    push.mutable_id()->set_replica_slot(worker);
    push.set_computed_on_version(version);
    push.set_pull_after(true);
    push.set_pull_min_version(version + 1);
    std::vector<float> g(3000);
    for (size_t i = 0; i < g.size(); ++i) g[i] = scale * static_cast<float>(i % 7) - 1.0f;
    tensor::SetFloatTensor({1000, 3}, g, push.add_gradients()->mutable_tensor());
    push.mutable_gradients(0)->set_name("w");
    tensor::SetFloatTensor({3}, std::vector<float>{scale, -scale, 0.5f},
                           push.add_gradients()->mutable_tensor());
    push.mutable_gradients(1)->set_name("b");
    return push;
  }

  ClusterSpec spec_{1, 2, true};
  std::string dir_;
  std::unique_ptr<Daemon> server_;
};

// Five async steps with pushes (pull_after) and a pull, the tensors in
// `wire`; returns every answer, serialized.
std::vector<std::string> RunSteps(ps_client::ParameterClient* client,
                                  proto::DataType wire = proto::DT_FLOAT32) {
  std::vector<std::string> answers;
  int64_t version = 0;
  for (int step = 0; step < 5; ++step) {
    std::vector<proto::PushResponse> pushed;
    absl::Status s = client->PushAll(
        {[&] {
          proto::PushRequest p;
          p.mutable_id()->set_worker(0);
          p.mutable_id()->set_step(step);
          p.set_computed_on_version(version);
          p.set_pull_after(true);
          p.set_pull_wire_dtype(wire);
          std::vector<float> g(3000, 0.3f * static_cast<float>(step + 1));
          EXPECT_TRUE(
              tensor::SetWireTensor({1000, 3}, g, wire, p.add_gradients()->mutable_tensor()).ok());
          p.mutable_gradients(0)->set_name("w");
          EXPECT_TRUE(tensor::SetWireTensor({3}, std::vector<float>{1, 1, 1}, wire,
                                            p.add_gradients()->mutable_tensor())
                          .ok());
          p.mutable_gradients(1)->set_name("b");
          return p;
        }()},
        &pushed, absl::Seconds(30));
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return answers;
    version = pushed[0].version();
    answers.push_back(pushed[0].SerializeAsString());
  }
  std::vector<proto::PullResponse> pulled;
  proto::PullRequest pull;
  pull.set_min_version(version);
  pull.set_wire_dtype(wire);
  EXPECT_TRUE(client->PullAll({pull}, &pulled, absl::Seconds(30)).ok());
  answers.push_back(pulled[0].SerializeAsString());
  return answers;
}

TEST_F(PsDataChannelTest, DataChannelAndGrpcGiveTheSameAnswers) {
  StartServer();
  EXPECT_THAT(server_->Log(), HasSubstr("data channel on 127.0.0.1:"));
  std::vector<std::string> over_data, over_grpc;
  {
    rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30),
                                    /*data_channel=*/true);
    Configure(&client, proto::MODE_ASYNC);
    over_data = RunSteps(&client);
    EXPECT_EQ(client.data_channel_calls(), 6);
  }
  server_->process().Stop(absl::Seconds(10));
  server_.reset();
  StartServer();  // a fresh shard with the same start
  {
    rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30),
                                    /*data_channel=*/false);
    Configure(&client, proto::MODE_ASYNC);
    over_grpc = RunSteps(&client);
    EXPECT_EQ(client.data_channel_calls(), 0);
  }
  ASSERT_EQ(over_data.size(), 6u);
  EXPECT_EQ(over_data, over_grpc);
}

// --wire_dtype's 16-bit tensors take the data channel (its size check is
// per dtype) and give the same answers as over gRPC, in half the bytes.
TEST_F(PsDataChannelTest, SixteenBitTensorsTakeTheDataChannelLikeGrpc) {
  for (proto::DataType wire : {proto::DT_BFLOAT16, proto::DT_FLOAT16}) {
    std::vector<std::string> over_data, over_grpc;
    for (bool data_channel : {true, false}) {
      if (server_) server_->process().Stop(absl::Seconds(10));
      server_.reset();
      StartServer();
      rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30), data_channel);
      Configure(&client, proto::MODE_ASYNC, wire);
      (data_channel ? over_data : over_grpc) = RunSteps(&client, wire);
      EXPECT_EQ(client.data_channel_calls(), data_channel ? 6 : 0);
    }
    ASSERT_EQ(over_data.size(), 6u);
    EXPECT_EQ(over_data, over_grpc);
    proto::PullResponse last;
    ASSERT_TRUE(last.ParseFromString(over_data.back()));
    ASSERT_EQ(last.variables_size(), 2);
    EXPECT_EQ(last.variables(0).tensor().dtype(), wire);
    EXPECT_EQ(last.variables(0).tensor().data().size(), 3000u * 2);
  }
}

TEST_F(PsDataChannelTest, ServerWithoutDataChannelIsReachedOverGrpc) {
  StartServer({"--data_channel=false"});
  EXPECT_THAT(server_->Log(), ::testing::Not(HasSubstr("data channel on")));
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30),
                                  /*data_channel=*/true);
  Configure(&client, proto::MODE_ASYNC);
  EXPECT_EQ(RunSteps(&client).size(), 6u);
  EXPECT_EQ(client.data_channel_calls(), 0);
}

TEST_F(PsDataChannelTest, ServerErrorsComeBackWithTheirCodeAndName) {
  StartServer();
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30));
  Configure(&client, proto::MODE_ASYNC);
  proto::PushRequest bad = Push(0, 0, 0, 1.0f);
  bad.mutable_gradients(0)->set_name("nope");
  std::vector<proto::PushResponse> responses;
  absl::Status s = client.PushAll({bad}, &responses, absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:0 (" + address() + ") Push: "));
  EXPECT_THAT(s.message(), HasSubstr("nope"));
  EXPECT_EQ(client.data_channel_calls(), 1);
  // The connection goes on.
  EXPECT_TRUE(client.PushAll({Push(0, 0, 0, 1.0f)}, &responses, absl::Seconds(30)).ok());
  EXPECT_EQ(client.data_channel_calls(), 2);
}

TEST_F(PsDataChannelTest, AKilledServerIsReachedAgainAfterItsRestart) {
  StartServer();
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(60));
  Configure(&client, proto::MODE_ASYNC);
  std::vector<proto::PushResponse> responses;
  ASSERT_TRUE(client.PushAll({Push(0, 0, 0, 1.0f)}, &responses, absl::Seconds(30)).ok());
  server_->process().Signal(SIGKILL);
  ASSERT_TRUE(server_->process().Wait(absl::Seconds(30)).ok());
  server_.reset();
  // The call starts while the server is down; it retries until it is back.
  absl::Status pushed;
  std::thread caller([&] {
    proto::PullRequest pull;
    std::vector<proto::PullResponse> pulled;
    pushed = client.PullAll({pull}, &pulled, absl::Seconds(30));
  });
  StartServer();
  caller.join();
  // The restarted server has no configuration and no variables yet: the
  // pull reaches it (and is refused by it), rather than failing on the way.
  EXPECT_EQ(pushed.code(), absl::StatusCode::kFailedPrecondition) << pushed;
  Configure(&client, proto::MODE_ASYNC);
  EXPECT_TRUE(client.PushAll({Push(0, 0, 0, 1.0f)}, &responses, absl::Seconds(30)).ok());
  EXPECT_GE(client.data_channel_calls(), 3);
}

TEST_F(PsDataChannelTest, CancelAllEndsAWaitingPull) {
  StartServer();
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(60));
  Configure(&client, proto::MODE_SYNC);
  absl::Status pulled;
  const absl::Time start = absl::Now();
  std::thread caller([&] {
    proto::PullRequest pull;
    pull.set_min_version(1000);  // never reached
    std::vector<proto::PullResponse> responses;
    pulled = client.PullAll({pull}, &responses, absl::Minutes(5));
  });
  // CancelAll may come before the call starts or while it waits: both end it.
  for (int i = 0; i < 1000 && client.data_channel_calls() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(5));  // polls, bounded: at most 5 s
  }
  client.CancelAll();
  caller.join();
  EXPECT_EQ(pulled.code(), absl::StatusCode::kCancelled) << pulled;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// Sync mode over 2 shards: a worker's push to shard 0 waits for the step
// (another replica's gradient), its push to shard 1 fails. The failure must
// end the whole PushAll at once, not after the call timeout: otherwise a
// worker waits out a step that can no longer complete.
TEST(PsDataChannelTwoShardsTest, OneShardsFailureEndsTheOthersWait) {
  const std::string dir = MakeTempDir("ps_two_shards");
  WriteFile(dir + "/token", kToken);
  ClusterSpec spec(2, 2, true);
  std::vector<std::unique_ptr<Daemon>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    auto d = Daemon::Start("ps_server", spec.TfConfig(cluster::TaskType::kPs, i),
                           {"--auth_token_file=" + dir + "/token"}, dir);
    ASSERT_TRUE(d.ok());
    servers.push_back(*std::move(d));
    addresses.push_back(spec.Address(cluster::TaskType::kPs, i));
  }
  rpc::SecurityOptions security{.token = kToken};
  for (const auto& a : addresses) ASSERT_TRUE(WaitForServing(a, security, absl::Seconds(30)).ok());
  for (bool data_channel : {true, false}) {
    SCOPED_TRACE(data_channel ? "data channel" : "gRPC");
    rpc::GrpcParameterClient client(addresses, security, absl::Seconds(30), data_channel);
    std::vector<proto::PushRequest> pushes(2);
    for (int s = 0; s < 2; ++s) {
      proto::ConfigureRequest config;
      config.set_shard_index(s);
      config.set_num_shards(2);
      config.set_num_workers(2);
      config.set_job_id(data_channel ? "dc" : "grpc");
      config.mutable_policy()->set_mode(proto::MODE_SYNC);
      config.mutable_policy()->set_replicas_to_aggregate(2);
      config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
      config.mutable_optimizer()->set_learning_rate(0.1);
      proto::CreateVariablesRequest create;
      auto* v = create.add_variables();
      v->set_name(absl::StrCat("v", s));
      tensor::SetFloatTensor({4}, std::vector<float>{1, 2, 3, 4}, v->mutable_tensor());
      if (data_channel) {  // the second round reuses the configured shards
        ASSERT_TRUE(client.Configure(s, config).ok());
        ASSERT_TRUE(client.CreateVariables(s, create).ok());
      }
      pushes[s].mutable_id()->set_worker(0);
      pushes[s].mutable_id()->set_step(0);  // the gRPC round repeats it: a DUPLICATE that waits too
      pushes[s].set_computed_on_version(0);
      pushes[s].set_pull_after(true);
      pushes[s].set_pull_min_version(1);
      auto* g = pushes[s].add_gradients();
      g->set_name(s == 0 ? "v0" : "no_such_variable");
      tensor::SetFloatTensor({4}, std::vector<float>{1, 1, 1, 1}, g->mutable_tensor());
    }
    std::vector<proto::PushResponse> responses;
    const absl::Time start = absl::Now();
    absl::Status s = client.PushAll(pushes, &responses, absl::Minutes(5));
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_THAT(s.message(), HasSubstr("no_such_variable"));
    EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "the shard-0 wait was not cancelled";
  }
  for (auto& d : servers) d->process().Stop(absl::Seconds(10));
}

}  // namespace
}  // namespace testing
}  // namespace psc

namespace psc {
namespace testing {
namespace {

// Resident memory of process `pid`, in KiB.
int64_t RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Frames that announce far more than their variables hold (256 MiB for a
// 12-byte variable) are answered at once and reserve nothing: before, each
// one raised the server's RSS by 256 MiB and left it reading.
TEST_F(PsDataChannelTest, AnnouncedBytesAreBoundedByTheVariable) {
  StartServer();
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30),
                                  /*data_channel=*/false);
  Configure(&client, proto::MODE_ASYNC);
  auto stub = proto::ParameterServer::NewStub(rpc::CreateChannel(address(), security()));
  const int64_t rss_before = RssKib(server_->process().pid());
  ASSERT_GT(rss_before, 0);
  std::vector<std::unique_ptr<data_channel::SocketStream>> streams;
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security(), absl::Seconds(10));
    proto::OpenDataChannelResponse open;
    ASSERT_TRUE(stub->OpenDataChannel(&context, {}, &open).ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    auto stream = data_channel::ConnectTcp("127.0.0.1", open.port(), deadline);
    ASSERT_TRUE(stream.ok()) << stream.status();
    data_channel::FrameHeader hello;
    hello.kind = data_channel::Kind::kHello;
    ASSERT_TRUE(data_channel::SendFrame(stream->get(), hello, open.ticket(), {}, deadline).ok());
    ASSERT_TRUE(data_channel::ReceiveFrameHead(stream->get(), {}, deadline).ok());
    proto::PushRequest meta = Push(0, i, 0, 1.0f);
    for (auto& g : *meta.mutable_gradients()) g.mutable_tensor()->clear_data();
    meta.mutable_gradients(1)->mutable_tensor()->set_shape(0, 64 << 20);  // "b" is [3]
    const std::string m = meta.SerializeAsString();
    data_channel::FrameHeader h;
    h.kind = data_channel::Kind::kPush;
    h.meta_bytes = static_cast<uint32_t>(m.size());
    h.num_blobs = 2;
    const std::string head = data_channel::EncodeFrameHead(h, {12000, uint64_t{256} << 20}) + m;
    ASSERT_TRUE(
        (*stream)->WriteAll({{const_cast<char*>(head.data()), head.size()}}, deadline).ok());
    auto answer = data_channel::ReceiveFrameHead(stream->get(), {}, deadline);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(answer->meta, HasSubstr("gradient for \"b\" has shape [67108864]"));
    streams.push_back(*std::move(stream));
  }
  const int64_t rss_after = RssKib(server_->process().pid());
  std::printf("ps_server RSS %lld KiB before, %lld KiB after 4 frames announcing 256 MiB each\n",
              static_cast<long long>(rss_before), static_cast<long long>(rss_after));
  EXPECT_LT(rss_after - rss_before, 64 << 10)
      << "RSS grew from " << rss_before << " to " << rss_after << " KiB";
}

// SIGTERM with 20 pulls waiting and 20 pushes half sent on the data channel:
// every pull gets UNAVAILABLE at once, every push (its rest sent after the
// signal, within --shutdown_grace) its normal answer, and the shard's final
// counters, logged at exit, have every accepted push applied.
TEST_F(PsDataChannelTest, SigtermAnswersEveryRequestInFlight) {
  StartServer({"--shutdown_grace=5s"});
  rpc::GrpcParameterClient client({address()}, security(), absl::Seconds(30),
                                  /*data_channel=*/false);
  constexpr int kPulls = 20, kPushes = 20;
  proto::ConfigureRequest config;
  config.set_num_shards(1);
  config.set_num_workers(kPushes);
  config.mutable_policy()->set_mode(proto::MODE_ASYNC);
  config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.5);
  ASSERT_TRUE(client.Configure(0, config).ok());
  proto::CreateVariablesRequest create;
  create.add_variables()->set_name("w");
  tensor::SetFloatTensor({1000, 3}, std::vector<float>(3000, 1.0f),
                         create.mutable_variables(0)->mutable_tensor());
  create.add_variables()->set_name("b");
  tensor::SetFloatTensor({3}, std::vector<float>{1, 2, 3},
                         create.mutable_variables(1)->mutable_tensor());
  ASSERT_TRUE(client.CreateVariables(0, create).ok());
  auto stub = proto::ParameterServer::NewStub(rpc::CreateChannel(address(), security()));
  auto open = [&]() -> absl::StatusOr<proto::OpenDataChannelResponse> {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security(), absl::Seconds(10));
    proto::OpenDataChannelResponse response;
    grpc::Status s = stub->OpenDataChannel(&context, {}, &response);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return response;
  };
  const absl::Time soon = absl::Now() + absl::Seconds(60);
  std::vector<absl::Status> pulled(kPulls);
  std::vector<std::thread> pullers;
  for (int i = 0; i < kPulls; ++i) {
    auto channel = open();
    ASSERT_TRUE(channel.ok()) << channel.status();
    pullers.push_back(data_channel::testing::PullInThread(
        "127.0.0.1", channel->port(), channel->ticket(), 1000, soon, &pulled[i]));
  }
  int64_t waiting = 0;
  for (int i = 0; i < 1000 && waiting < kPulls; ++i) {  // polling, 10 s at most
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security(), absl::Seconds(10));
    proto::ShardStats stats;
    ASSERT_TRUE(stub->GetStats(&context, {}, &stats).ok());
    waiting = stats.pulls_waiting();
    if (waiting < kPulls) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(waiting, kPulls);
  std::vector<data_channel::testing::RawClient> pushers;
  std::vector<data_channel::testing::FrameBytes> frames;
  for (int i = 0; i < kPushes; ++i) {
    auto channel = open();
    ASSERT_TRUE(channel.ok());
    auto raw = data_channel::testing::RawClient::Open("127.0.0.1", channel->port(),
                                                      channel->ticket(), soon);
    ASSERT_TRUE(raw.ok()) << raw.status();
    proto::PushRequest push = Push(i, 0, 0, 1.0f);
    push.mutable_id()->set_replica_slot(i);
    push.set_pull_after(false);
    frames.push_back(data_channel::testing::PushFrame(push, 7 + i));
    const auto& f = frames.back();
    ASSERT_TRUE(raw->Send(f.head + f.blobs.substr(0, f.blobs.size() / 2), soon).ok());
    pushers.push_back(*std::move(raw));
  }
  const absl::Time start = absl::Now();
  server_->process().Signal(SIGTERM);
  for (std::thread& t : pullers) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const absl::Status& s : pulled) EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  for (int i = 0; i < kPushes; ++i) {
    const auto& f = frames[i];
    ASSERT_TRUE(pushers[i].Send(f.blobs.substr(f.blobs.size() / 2), soon).ok());
  }
  for (int i = 0; i < kPushes; ++i) {
    auto answer = pushers[i].Receive(soon);
    ASSERT_TRUE(answer.ok()) << i << ": " << answer.status() << server_->Log();
    EXPECT_EQ(answer->header.call_id, static_cast<uint64_t>(7 + i));
    EXPECT_EQ(answer->header.code, 0) << answer->meta;
  }
  auto exit = server_->process().Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->ToString(), "exit 0") << server_->Log();
  EXPECT_THAT(server_->Log(),
              HasSubstr("final counters: 20 pushes accepted, 20 gradients applied, 0 dropped "
                        "stale, 0 discarded, 0 pending"))
      << server_->Log();
  server_.reset();
}

}  // namespace
}  // namespace testing
}  // namespace psc
