// A ps_server's stop over its data channel, in process: the real
// ShardServer, ShardDataHandler and DataServer, stopped as main stops them
// (StopServing), with pulls waiting and pushes half sent.
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/data_channel/testing/raw_client.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/data_handler.h"

namespace psc {
namespace ps_server {
namespace {

constexpr int kPulls = 20;
constexpr int kPushes = 20;

proto::PushRequest Push(int worker) {
  proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_step(0);
  p.mutable_id()->set_replica_slot(worker);
  auto* t = p.add_gradients();
  t->set_name("w");
  tensor::SetFloatTensor({1000, 3}, std::vector<float>(3000, 0.5f), t->mutable_tensor());
  return p;
}

TEST(StopServingTest, WaitingPullsAndPushesInFlightAreAllAnsweredAndCounted) {
  base::RealClock clock;
  ShardServerOptions options;
  options.shard.clock = &clock;
  options.max_pull_wait = absl::Minutes(1);
  ShardServer server(options);
  proto::ConfigureRequest config;
  config.set_num_shards(1);
  config.set_num_workers(kPushes);
  config.mutable_policy()->set_mode(proto::MODE_ASYNC);
  config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.1);
  ASSERT_TRUE(server.Configure(config).ok());
  proto::CreateVariablesRequest create;
  create.add_variables()->set_name("w");
  tensor::SetFloatTensor({1000, 3}, std::vector<float>(3000, 1.0f),
                         create.mutable_variables(0)->mutable_tensor());
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(server.CreateVariables(create, &created).ok());
  ShardDataHandler handler(&server);
  auto data = data_channel::DataServer::Start({}, &handler);
  ASSERT_TRUE(data.ok()) << data.status();
  const absl::Time soon = absl::Now() + absl::Seconds(60);

  // kPulls pulls waiting for a version that will not come.
  std::vector<absl::Status> pulled(kPulls);
  std::vector<std::thread> pullers;
  for (int i = 0; i < kPulls; ++i) {
    auto ticket = (*data)->IssueTicket();
    ASSERT_TRUE(ticket.ok());
    pullers.push_back(data_channel::testing::PullInThread("127.0.0.1", (*data)->port(), *ticket,
                                                          1000, soon, &pulled[i]));
  }
  for (int i = 0; i < 1000 && server.shard().num_waiters() < kPulls; ++i) {
    absl::SleepFor(absl::Milliseconds(10));  // polling, 10 s at most
  }
  ASSERT_EQ(server.shard().num_waiters(), kPulls);
  // kPushes pushes half sent.
  std::vector<data_channel::testing::RawClient> pushers;
  std::vector<data_channel::testing::FrameBytes> frames;
  for (int i = 0; i < kPushes; ++i) {
    auto ticket = (*data)->IssueTicket();
    ASSERT_TRUE(ticket.ok());
    auto raw = data_channel::testing::RawClient::Open("127.0.0.1", (*data)->port(), *ticket, soon);
    ASSERT_TRUE(raw.ok()) << raw.status();
    frames.push_back(data_channel::testing::PushFrame(Push(i), 100 + i));
    const auto& f = frames.back();
    ASSERT_TRUE(raw->Send(f.head + f.blobs.substr(0, f.blobs.size() / 2), soon).ok());
    pushers.push_back(*std::move(raw));
  }

  const absl::Time start = absl::Now();
  std::thread stop([&] { StopServing(&server, data->get(), absl::Seconds(10)); });
  for (std::thread& t : pullers) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // at once, not at the grace's end
  for (const absl::Status& s : pulled) EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // The pushes' rest arrives within the grace: each gets its normal answer.
  for (int i = 0; i < kPushes; ++i) {
    const auto& f = frames[i];
    ASSERT_TRUE(pushers[i].Send(f.blobs.substr(f.blobs.size() / 2), soon).ok());
  }
  for (int i = 0; i < kPushes; ++i) {
    auto answer = pushers[i].Receive(soon);
    ASSERT_TRUE(answer.ok()) << i << ": " << answer.status();
    EXPECT_EQ(answer->header.call_id, static_cast<uint64_t>(100 + i));
    ASSERT_EQ(answer->header.code, 0) << answer->meta;
    proto::PushResponse response;
    ASSERT_TRUE(response.ParseFromString(answer->meta));
    EXPECT_EQ(response.outcome(), proto::PushResponse::APPLIED);
    EXPECT_TRUE(pushers[i].EndsBy(soon));
  }
  stop.join();
  const proto::ShardStats stats = server.Stats();
  EXPECT_EQ(stats.pushes_accepted(), kPushes);
  EXPECT_EQ(stats.gradients_applied(), kPushes);
  EXPECT_EQ(stats.pulls_waiting(), 0);
  EXPECT_EQ(stats.version(), kPushes);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
