#include "common/ps_client/parameter_server_client.h"

#include <atomic>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_client {
namespace {

using ::testing::HasSubstr;

// A shard that answers from a script of statuses (then OK), counts its
// calls, and can hold a call until it is cancelled.
class FakeTransport : public ShardTransport {
 public:
  void Script(std::deque<absl::Status> answers) {
    absl::MutexLock lock(&mu_);
    answers_ = std::move(answers);
  }
  void HoldCalls() { hold_ = true; }
  int calls() const { return calls_.load(); }
  absl::Notification& holding() { return holding_; }

  absl::Status Push(const proto::PushRequest&, proto::PushResponse* response,
                    const Attempt& a) override {
    response->set_version(7);
    return Answer(a);
  }
  absl::Status Pull(const proto::PullRequest&, proto::PullResponse* response,
                    const Attempt& a) override {
    response->set_version(8);
    return Answer(a);
  }
  absl::Status Configure(const proto::ConfigureRequest&, const Attempt& a) override {
    return Answer(a);
  }
  absl::Status CreateVariables(const proto::CreateVariablesRequest&, const Attempt& a) override {
    return Answer(a);
  }
  absl::Status UpdateMembership(const proto::UpdateMembershipRequest&,
                                proto::UpdateMembershipResponse*, const Attempt& a) override {
    return Answer(a);
  }
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest&, proto::SaveCheckpointResponse*,
                              const Attempt& a) override {
    return Answer(a);
  }
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest&,
                                 proto::RestoreCheckpointResponse*, const Attempt& a) override {
    return Answer(a);
  }
  absl::Status ExportState(const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response, const Attempt& a) override {
    response->set_state(absl::StrCat("state of step ", request.step()));
    response->set_version(10);
    return Answer(a);
  }
  absl::Status ImportState(const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response, const Attempt& a) override {
    response->set_step(request.step());
    response->set_version(11);
    return Answer(a);
  }
  absl::Status GetStats(proto::ShardStats* response, const Attempt& a) override {
    response->set_version(9);
    return Answer(a);
  }
  absl::Status OpenDataChannel(proto::OpenDataChannelResponse*, const Attempt& a) override {
    return absl::FailedPreconditionError("no data channel");
  }

 private:
  absl::Status Answer(const Attempt& a) {
    ++calls_;
    if (hold_) {
      absl::Notification ended;
      CancelScope scope(a, [&ended] { ended.Notify(); });
      if (!scope.ok()) return absl::CancelledError("cancelled");
      holding_.Notify();
      // Bounded: a test that never cancels fails here instead of hanging.
      if (!ended.WaitForNotificationWithTimeout(absl::Seconds(30))) {
        return absl::DeadlineExceededError("never cancelled");
      }
      return absl::CancelledError("cancelled");
    }
    absl::MutexLock lock(&mu_);
    if (answers_.empty()) return absl::OkStatus();
    absl::Status s = answers_.front();
    answers_.pop_front();
    return s;
  }

  absl::Mutex mu_;
  std::deque<absl::Status> answers_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> calls_{0};
  std::atomic<bool> hold_{false};
  absl::Notification holding_;
};

// A data path that takes every call, or declines every call.
class FakeDataPath : public DataPath {
 public:
  explicit FakeDataPath(bool takes) : takes_(takes) {}
  std::optional<absl::Status> Push(const proto::PushRequest&, proto::PushResponse* response,
                                   const Attempt&) override {
    if (!takes_) return std::nullopt;
    ++calls_;
    response->set_version(70);
    return absl::OkStatus();
  }
  std::optional<absl::Status> Pull(const proto::PullRequest&, proto::PullResponse* response,
                                   const Attempt&) override {
    if (!takes_) return std::nullopt;
    ++calls_;
    response->set_version(80);
    return absl::OkStatus();
  }
  int64_t calls() const override { return calls_; }

 private:
  const bool takes_;
  std::atomic<int64_t> calls_{0};
};

struct Cluster {
  std::vector<FakeTransport*> transports;
  std::unique_ptr<ParameterServerClient> client;
};

Cluster Make(int shards, base::Clock* clock, std::vector<bool> data = {}) {
  Cluster c;
  std::vector<ShardEndpoint> endpoints;
  for (int i = 0; i < shards; ++i) {
    ShardEndpoint e;
    e.name = "ps:" + std::to_string(i) + " (fake)";
    auto t = std::make_unique<FakeTransport>();
    c.transports.push_back(t.get());
    e.transport = std::move(t);
    if (i < static_cast<int>(data.size())) e.data = std::make_unique<FakeDataPath>(data[i]);
    endpoints.push_back(std::move(e));
  }
  c.client = std::make_unique<ParameterServerClient>(
      std::move(endpoints),
      ParameterServerClientOptions{.retry_window = absl::Seconds(10), .clock = clock});
  return c;
}

TEST(ParameterServerClientTest, UnavailableIsRetriedWithBackoffWithinTheWindow) {
  base::FakeClock clock;
  Cluster c = Make(1, &clock);
  c.transports[0]->Script({absl::UnavailableError("restarting"), absl::UnavailableError("still")});
  const absl::Time start = clock.Now();
  EXPECT_TRUE(c.client->Configure(0, {}).ok());
  EXPECT_EQ(c.transports[0]->calls(), 3);
  EXPECT_EQ(c.client->call_counts().retries, 2) << "the worker's metrics count them";
  EXPECT_GE(clock.Now() - start, absl::Milliseconds(200)) << "it backed off between tries";
  // Past the window, UNAVAILABLE comes back, naming the shard and the call.
  std::deque<absl::Status> down(200, absl::UnavailableError("down"));
  c.transports[0]->Script(down);
  absl::Status s = c.client->Configure(0, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "ps:0 (fake) Configure: down");
  EXPECT_LT(c.transports[0]->calls(), 3 + 50) << "backoff, not a busy loop";
}

TEST(ParameterServerClientTest, OtherErrorsAreNotRetried) {
  base::FakeClock clock;
  Cluster c = Make(1, &clock);
  c.transports[0]->Script({absl::NotFoundError("no variable \"x\"")});
  absl::Status s = c.client->CreateVariables(0, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "ps:0 (fake) CreateVariables: no variable \"x\"");
  EXPECT_EQ(c.transports[0]->calls(), 1);
  EXPECT_EQ(c.client->Configure(3, {}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParameterServerClientTest, ExportAndImportStateGoThroughTheRetryLoop) {
  base::FakeClock clock;
  Cluster c = Make(2, &clock);
  c.transports[0]->Script({absl::UnavailableError("restarting")});
  proto::ExportStateRequest export_request;
  export_request.set_step(4);
  proto::ExportStateResponse exported;
  ASSERT_TRUE(c.client->ExportState(0, export_request, &exported).ok());
  EXPECT_EQ(exported.state(), "state of step 4");
  EXPECT_EQ(exported.version(), 10);
  EXPECT_EQ(c.transports[0]->calls(), 2) << "UNAVAILABLE was retried";
  proto::ImportStateRequest import_request;
  import_request.set_state(exported.state());
  import_request.set_step(4);
  proto::ImportStateResponse imported;
  c.transports[1]->Script({absl::UnavailableError("restarting")});
  ASSERT_TRUE(c.client->ImportState(1, import_request, &imported).ok());
  EXPECT_EQ(imported.step(), 4);
  EXPECT_EQ(imported.version(), 11);
  EXPECT_EQ(c.transports[1]->calls(), 2);
  // Other errors come back at once, naming the shard and the call.
  c.transports[1]->Script({absl::DataLossError("cannot parse the checkpoint data")});
  absl::Status s = c.client->ImportState(1, import_request, &imported);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "ps:1 (fake) ImportState: cannot parse the checkpoint data");
  EXPECT_EQ(c.transports[1]->calls(), 3);
  EXPECT_EQ(c.client->ExportState(2, export_request, &exported).code(),
            absl::StatusCode::kInvalidArgument);
  // And CancelAll ends them as every other call.
  c.client->CancelAll();
  EXPECT_EQ(c.client->ExportState(0, export_request, &exported).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(c.client->ImportState(1, import_request, &imported).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(c.transports[0]->calls(), 2);
  EXPECT_EQ(c.transports[1]->calls(), 3);
}

TEST(ParameterServerClientTest, PushAndPullTakeTheDataPathWhenItTakesThem) {
  base::FakeClock clock;
  Cluster c = Make(3, &clock, {true, false});
  std::vector<proto::PushResponse> pushed;
  ASSERT_TRUE(
      c.client->PushAll(std::vector<proto::PushRequest>(3), &pushed, absl::Seconds(1)).ok());
  EXPECT_EQ(pushed[0].version(), 70) << "over the data path";
  EXPECT_EQ(pushed[1].version(), 7) << "declined: over the transport";
  EXPECT_EQ(pushed[2].version(), 7) << "no data path";
  std::vector<proto::PullResponse> pulled;
  ASSERT_TRUE(
      c.client->PullAll(std::vector<proto::PullRequest>(3), &pulled, absl::Seconds(1)).ok());
  EXPECT_EQ(pulled[0].version(), 80);
  EXPECT_EQ(pulled[1].version(), 8);
  EXPECT_EQ(c.client->data_channel_calls(), 2);
  // One PushAll and one PullAll, whatever the shards' paths; none retried.
  EXPECT_EQ(c.client->call_counts().pushes, 1);
  EXPECT_EQ(c.client->call_counts().pulls, 1);
  EXPECT_EQ(c.client->call_counts().retries, 0);
  EXPECT_EQ(c.client->GetStats(2)->version(), 9);
  EXPECT_EQ(c.client->PushAll({}, &pushed, absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParameterServerClientTest, OneShardsFailureCancelsTheOthersCall) {
  Cluster c = Make(2, nullptr);
  c.transports[0]->HoldCalls();  // shard 0 waits (a sync step that will not come)
  c.transports[1]->Script({absl::NotFoundError("no such variable")});
  std::vector<proto::PushResponse> responses;
  absl::Status s =
      c.client->PushAll(std::vector<proto::PushRequest>(2), &responses, absl::Minutes(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:1 (fake) Push: no such variable"));
}

TEST(ParameterServerClientTest, CancelAllEndsACallInFlightAndRefusesLaterOnes) {
  Cluster c = Make(1, nullptr);
  c.transports[0]->HoldCalls();
  absl::Status pulled;
  std::thread caller([&] {
    std::vector<proto::PullResponse> responses;
    pulled = c.client->PullAll({proto::PullRequest()}, &responses, absl::Minutes(5));
  });
  ASSERT_TRUE(c.transports[0]->holding().WaitForNotificationWithTimeout(absl::Seconds(30)));
  c.client->CancelAll();
  caller.join();
  EXPECT_EQ(pulled.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(pulled.message(), "ps:0 Pull: cancelled");
  const int calls = c.transports[0]->calls();
  EXPECT_EQ(c.client->Configure(0, {}).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(c.transports[0]->calls(), calls) << "no call starts after CancelAll";
}

}  // namespace
}  // namespace ps_client
}  // namespace psc
