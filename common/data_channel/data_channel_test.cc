// DataServer + DataConnection over real loopback sockets, with a fake
// handler in place of a shard.
#include <sys/socket.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/data_channel/data_client.h"
#include "common/data_channel/data_server.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/testing/raw_client.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace data_channel {
namespace {

// Push echoes the gradients back as variables (with pull_after); Pull with
// min_version > 100 waits until its deadline or Release(), and > 1000 until
// Release() only (a server that does not answer). A gradient named
// "refuse" gets FAILED_PRECONDITION.
class FakeHandler : public DataHandler {
 public:
  absl::Status Push(const proto::PushRequest& request, absl::Time deadline,
                    proto::PushResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      last_push_ = request;
    }
    for (const auto& g : request.gradients()) {
      if (g.name() == "refuse") return absl::FailedPreconditionError("refused: pull again");
    }
    response->set_outcome(proto::PushResponse::APPLIED);
    response->set_version(request.computed_on_version() + 1);
    if (request.pull_after()) *response->mutable_variables() = request.gradients();
    return absl::OkStatus();
  }
  // A gradient named "not-here" is refused before its bytes are read.
  absl::Status CheckPush(const proto::PushRequest& meta) override {
    for (const auto& g : meta.gradients()) {
      if (g.name() == "not-here") return absl::NotFoundError("no variable \"not-here\"");
    }
    return absl::OkStatus();
  }
  absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                    proto::PullResponse* response) override {
    if (request.min_version() > 1000) {  // ignores its deadline: only Release ends it
      release_.WaitForNotification();
      return absl::UnavailableError("released");
    }
    if (request.min_version() > 100) {
      if (!release_.WaitForNotificationWithDeadline(deadline)) {
        return absl::DeadlineExceededError("no such version yet");
      }
      return absl::UnavailableError("released");
    }
    response->set_version(request.min_version());
    tensor::SetFloatTensor({2}, std::vector<float>{1.5f, -2.5f},
                           response->add_variables()->mutable_tensor());
    response->mutable_variables(0)->set_name("v");
    return absl::OkStatus();
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    if (!release_.HasBeenNotified()) release_.Notify();
  }
  proto::PushRequest last_push() {
    absl::MutexLock lock(&mu_);
    return last_push_;
  }

 private:
  absl::Mutex mu_;
  proto::PushRequest last_push_ ABSL_GUARDED_BY(mu_);
  absl::Notification release_;
};

class DataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DataServerOptions options;
    options.max_request_bytes = 8 << 20;
    auto server = DataServer::Start(options, &handler_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override { handler_.Release(); }

  absl::StatusOr<std::unique_ptr<DataConnection>> Connect() {
    auto ticket = server_->IssueTicket();
    if (!ticket.ok()) return ticket.status();
    return DataConnection::Open("127.0.0.1", server_->port(), *ticket, Soon());
  }
  static absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

  FakeHandler handler_;
  std::unique_ptr<DataServer> server_;
};

proto::PushRequest MakePush() {
  proto::PushRequest push;
  push.mutable_id()->set_worker(3);
  push.mutable_id()->set_unit(4);
  push.mutable_id()->set_step(5);
  push.mutable_id()->set_replica_slot(6);
  push.set_computed_on_version(41);
  push.set_worker_clock(7);
  push.set_pull_after(true);
  push.set_pull_min_version(42);
  push.set_step_refused("the loss is inf");
  push.set_gradients_overflow(true);
  push.set_loss_scale(512.0f);
  push.set_clock_worker(2);
  push.set_ends_unit(true);
  std::vector<float> big(435306);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.25f - 7.0f;
  auto* a = push.add_gradients();
  a->set_name("conv/kernel");
  tensor::SetFloatTensor({435306}, big, a->mutable_tensor());
  auto* b = push.add_gradients();
  b->set_name("scalar");
  tensor::SetFloatTensor({}, std::vector<float>{3.0f}, b->mutable_tensor());
  auto* c = push.add_gradients();
  c->set_name("empty");
  c->mutable_tensor()->set_dtype(proto::DT_FLOAT32);
  c->mutable_tensor()->add_shape(0);
  return push;
}

TEST_F(DataChannelTest, PushArrivesWholeAndTheAnswerComesBackByteForByte) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  const proto::PushRequest push = MakePush();
  proto::PushResponse response;
  ASSERT_TRUE((*connection)->Push(push, Soon(), &response).ok());
  // The handler saw exactly the request (every field, every byte).
  EXPECT_EQ(handler_.last_push().SerializeAsString(), push.SerializeAsString());
  EXPECT_EQ(response.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(response.version(), 42);
  ASSERT_EQ(response.variables_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(response.variables(i).SerializeAsString(), push.gradients(i).SerializeAsString());
  }
  // And again on the same connection.
  proto::PullRequest pull;
  pull.set_min_version(9);
  proto::PullResponse pulled;
  ASSERT_TRUE((*connection)->Pull(pull, Soon(), &pulled).ok());
  EXPECT_EQ(pulled.version(), 9);
  EXPECT_EQ(tensor::FloatValues(pulled.variables(0).tensor()), (std::vector<float>{1.5f, -2.5f}));
}

// DataConnection::Push copies PushRequest's fields one by one (to leave the
// tensor bytes out of the metadata): a new field must be added there.
TEST(DataChannelFieldsTest, PushCopiesEveryFieldOfPushRequest) {
  EXPECT_EQ(proto::PushRequest::descriptor()->field_count(), 14)
      << "PushRequest changed: update DataConnection::Push";
}

TEST_F(DataChannelTest, HandlerErrorsComeBackAndTheConnectionStaysUsable) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  proto::PushRequest push = MakePush();
  push.mutable_gradients(1)->set_name("refuse");
  proto::PushResponse response;
  absl::Status s = (*connection)->Push(push, Soon(), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "refused: pull again");
  EXPECT_FALSE((*connection)->broken());
  ASSERT_TRUE((*connection)->Push(MakePush(), Soon(), &response).ok());
}

TEST_F(DataChannelTest, TicketsAreCheckedAndSingleUse) {
  auto bad = DataConnection::Open("127.0.0.1", server_->port(), "not-a-ticket", Soon());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
  auto ticket = server_->IssueTicket();
  ASSERT_TRUE(ticket.ok());
  EXPECT_TRUE(DataConnection::Open("127.0.0.1", server_->port(), *ticket, Soon()).ok());
  auto again = DataConnection::Open("127.0.0.1", server_->port(), *ticket, Soon());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(again.status().message(),
            "data channel: unknown, used or expired ticket; call OpenDataChannel again");
}

TEST_F(DataChannelTest, ExpiredTicketIsRefused) {
  FakeHandler handler;
  DataServerOptions options;
  options.ticket_ttl = absl::ZeroDuration() - absl::Seconds(1);  // expired when issued
  auto server = DataServer::Start(options, &handler);
  ASSERT_TRUE(server.ok());
  auto ticket = (*server)->IssueTicket();
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(DataConnection::Open("127.0.0.1", (*server)->port(), *ticket, Soon()).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(DataChannelTest, TheServerEndsAWaitAtTheCallsDeadline) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  proto::PullRequest pull;
  pull.set_min_version(500);
  proto::PullResponse pulled;
  const absl::Time start = absl::Now();
  absl::Status s = (*connection)->Pull(pull, start + absl::Seconds(1), &pulled);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  // The server was told to give up 200 ms early, and it answered; the
  // connection goes on.
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_FALSE((*connection)->broken());
  pull.set_min_version(1);
  EXPECT_TRUE((*connection)->Pull(pull, Soon(), &pulled).ok());
}

TEST_F(DataChannelTest, ClientDeadlineEndsTheCallAndBreaksTheConnection) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  proto::PullRequest pull;
  pull.set_min_version(5000);
  proto::PullResponse pulled;
  const absl::Time start = absl::Now();
  absl::Status s = (*connection)->Pull(pull, absl::Now() + absl::Milliseconds(300), &pulled);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE((*connection)->broken());
  EXPECT_EQ((*connection)->Pull(pull, Soon(), &pulled).code(), absl::StatusCode::kUnavailable);
}

TEST_F(DataChannelTest, AbortEndsAWaitingCall) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  proto::PullRequest pull;
  pull.set_min_version(5000);
  absl::Status s;
  std::thread caller([&] {
    proto::PullResponse pulled;
    s = (*connection)->Pull(pull, Soon(), &pulled);
  });
  // Abort may come before or while the call waits: either way it fails.
  (*connection)->Abort();
  caller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(DataChannelTest, ServerStopEndsConnections) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  handler_.Release();  // the fake's waits end; Stop must not hang on them
  server_->Stop();
  proto::PullResponse pulled;
  EXPECT_EQ((*connection)->Pull(proto::PullRequest(), Soon(), &pulled).code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(DataChannelTest, OversizedPushIsRefusedAndTheServerGoesOn) {
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  proto::PushRequest push;
  auto* g = push.add_gradients();
  g->set_name("huge");
  tensor::SetFloatTensor({3 << 20}, std::vector<float>(3 << 20, 1.0f),
                         g->mutable_tensor());  // 12 MiB
  proto::PushResponse response;
  const absl::Time start = absl::Now();
  absl::Status s = (*connection)->Push(push, Soon(), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "push of 12582912 bytes exceeds the limit of 8388608 (--max_request_mb)");
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // The same connection goes on.
  EXPECT_TRUE((*connection)->Push(MakePush(), Soon(), &response).ok());
}

// A raw client past its hello (testing/raw_client.h).
absl::StatusOr<testing::RawClient> OpenRaw(DataServer* server, absl::Time deadline) {
  PSC_ASSIGN_OR_RETURN(std::string ticket, server->IssueTicket());
  return testing::RawClient::Open("127.0.0.1", server->port(), ticket, deadline);
}

// A frame's header, size table and meta, none of its blobs.
std::string Head(FrameHeader h, const std::string& meta, const std::vector<uint64_t>& sizes) {
  h.meta_bytes = static_cast<uint32_t>(meta.size());
  h.num_blobs = static_cast<uint32_t>(sizes.size());
  return EncodeFrameHead(h, sizes) + meta;
}

// Announcing bytes costs the server nothing until they arrive: a push whose
// frame the handler refuses is answered before its bytes are sent, and the
// connection goes on once they have been (drained, not stored).
TEST_F(DataChannelTest, ARefusedPushIsAnsweredBeforeItsBytesArrive) {
  auto raw = OpenRaw(server_.get(), Soon());
  ASSERT_TRUE(raw.ok()) << raw.status();
  proto::PushRequest meta;
  auto* g = meta.add_gradients();
  g->set_name("not-here");
  g->mutable_tensor()->set_dtype(proto::DT_FLOAT32);
  g->mutable_tensor()->add_shape(1 << 18);  // 1 MiB
  FrameHeader h;
  h.kind = Kind::kPush;
  h.call_id = 9;
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {1 << 20}), Soon()).ok());
  auto answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->header.call_id, 9u);
  EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(answer->meta, "no variable \"not-here\"");
  const std::string bytes(1 << 20, 'x');
  ASSERT_TRUE(
      raw->stream()->WriteAll({{const_cast<char*>(bytes.data()), bytes.size()}}, Soon()).ok());
  // A blob that does not match its own declared shape is refused the same way.
  g->set_name("ok");
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {12}), Soon()).ok());
  answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(answer->meta,
            "data channel: gradient for \"ok\" announces 12 bytes; its shape holds 1048576");
  // A sparse gradient (--topk_ratio) announces one value per index; more
  // indices than its shape holds, or a partial index, is refused.
  auto drain = [&](size_t n) {  // the refused frame's bytes, which the server skips
    std::string skipped(n, 'x');
    return raw->stream()->WriteAll({{skipped.data(), skipped.size()}}, Soon()).ok();
  };
  ASSERT_TRUE(drain(12));
  g->mutable_tensor()->set_indices(std::string(3 * sizeof(uint32_t), '\0'));
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {16}), Soon()).ok());
  answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->meta,
            "data channel: gradient for \"ok\" announces 16 bytes; its shape holds 12");
  ASSERT_TRUE(drain(16));
  g->mutable_tensor()->clear_shape();
  g->mutable_tensor()->add_shape(2);
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {12}), Soon()).ok());
  answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(answer->meta,
            "data channel: gradient for \"ok\" has 12 bytes of indices for its shape");
  // A row-sparse gradient announces its rows (of the shape's width); more
  // rows than its shape holds is refused.
  ASSERT_TRUE(drain(12));
  g->mutable_tensor()->clear_indices();
  g->mutable_tensor()->clear_shape();
  g->mutable_tensor()->add_shape(4);
  g->mutable_tensor()->add_shape(3);
  g->mutable_tensor()->set_row_sparse(true);
  g->mutable_tensor()->set_row_ids(std::string(2 * sizeof(int64_t), '\0'));
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {48}), Soon()).ok());
  answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->meta,
            "data channel: gradient for \"ok\" announces 48 bytes; its shape holds 24");
  ASSERT_TRUE(drain(48));
  g->mutable_tensor()->set_row_ids(std::string(5 * sizeof(int64_t), '\0'));
  ASSERT_TRUE(raw->Send(Head(h, meta.SerializeAsString(), {60}), Soon()).ok());
  answer = ReceiveFrameHead(raw->stream(), Limits{}, Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->meta,
            "data channel: gradient for \"ok\" has 40 bytes of row ids for its shape");
}

// ReadAsItArrives grows with the bytes that came, not with what was
// announced: 256 MiB announced, 1 KiB sent, the peer gone.
TEST(ReadAsItArrivesTest, AllocatesOnlyForBytesThatArrived) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  SocketStream reader(fds[0]);
  {
    SocketStream writer(fds[1]);
    std::string kib(1024, 'x');
    ASSERT_TRUE(writer.WriteAll({{kib.data(), kib.size()}}, absl::Now() + absl::Seconds(5)).ok());
  }  // closes the writer
  std::string out;
  absl::Status s =
      ReadAsItArrives(&reader, uint64_t{256} << 20, &out, absl::Now() + absl::Seconds(5));
  EXPECT_FALSE(s.ok());
  EXPECT_LE(out.capacity(), size_t{1} << 20);
  // A reused buffer of the right size is read into as it is.
  int more[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, more), 0);
  SocketStream r2(more[0]), w2(more[1]);
  std::string payload(100000, 'y');
  ASSERT_TRUE(w2.WriteAll({{payload.data(), payload.size()}}, absl::Now() + absl::Seconds(5)).ok());
  std::string buffer(100000, '\0');
  const char* before = buffer.data();
  ASSERT_TRUE(ReadAsItArrives(&r2, 100000, &buffer, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(buffer, payload);
  EXPECT_EQ(buffer.data(), before);
}

TEST_F(DataChannelTest, GarbageClosesThatConnectionOnly) {
  auto raw = ConnectTcp("127.0.0.1", server_->port(), Soon());
  ASSERT_TRUE(raw.ok());
  std::string junk(64, 'x');
  ASSERT_TRUE((*raw)->WriteAll({{junk.data(), junk.size()}}, Soon()).ok());
  char c;
  // The server answers with an error frame or closes; either way the stream ends.
  absl::Status read;
  for (int i = 0; i < 1000 && read.ok(); ++i) read = (*raw)->ReadExact(&c, 1, Soon());
  EXPECT_EQ(read.code(), absl::StatusCode::kUnavailable) << read;
  auto connection = Connect();
  ASSERT_TRUE(connection.ok());
  proto::PushResponse response;
  EXPECT_TRUE((*connection)->Push(MakePush(), Soon(), &response).ok());
}

TEST_F(DataChannelTest, ManyConnectionsAtOnce) {
  constexpr int kClients = 8;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kClients);
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto connection = Connect();
      if (!connection.ok()) {
        results[i] = connection.status();
        return;
      }
      for (int k = 0; k < 5 && results[i].ok(); ++k) {
        proto::PushResponse response;
        results[i] = (*connection)->Push(MakePush(), Soon(), &response);
        if (results[i].ok() && response.variables(0).tensor().data().size() != 435306 * 4) {
          results[i] = absl::InternalError("short answer");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r;
  EXPECT_EQ(server_->connections_accepted(), kClients);
}

// A push sent before the hello is answered UNAUTHENTICATED on its kind alone:
// the server reads its 28-byte header, not the size table or the bytes it
// announces (none are sent here), answers, and closes.
TEST_F(DataChannelTest, AFrameBeforeTheHelloIsAnsweredUnauthenticatedAndClosed) {
  for (uint32_t blobs : {1u, 1u << 20}) {  // the second past the frame limits too
    auto raw = testing::RawClient::Connect("127.0.0.1", server_->port(), Soon());
    ASSERT_TRUE(raw.ok()) << raw.status();
    FrameHeader h;
    h.kind = Kind::kPush;
    h.call_id = 77;
    h.meta_bytes = 1000;
    h.num_blobs = blobs;
    const std::string header = EncodeFrameHead(h, {}).substr(0, kHeaderBytes);
    ASSERT_TRUE(raw->Send(header, Soon()).ok());
    auto answer = raw->Receive(absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->header.kind, Kind::kResponse);
    EXPECT_EQ(answer->header.call_id, 77u);
    EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kUnauthenticated));
    EXPECT_EQ(answer->meta,
              "data channel: the first frame must be a hello with a ticket from OpenDataChannel");
    EXPECT_TRUE(raw->EndsBy(absl::Now() + absl::Seconds(5)));
  }
  // A whole push frame before the hello: the same answer, read before the
  // close, although the server never reads the frame.
  auto raw = testing::RawClient::Connect("127.0.0.1", server_->port(), Soon());
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw->Send(testing::PushFrame(MakePush(), 5).All(), Soon()).ok());
  auto answer = raw->Receive(Soon());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->header.code, static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_TRUE(raw->EndsBy(Soon()));
}

// Stop(grace): an idle connection is closed; a request whose bytes have
// begun to arrive is served if it completes within the grace; one still
// arriving at the end of the grace is answered UNAVAILABLE (with call_id 0
// when its head had not arrived whole). Nobody is left without an answer.
TEST_F(DataChannelTest, StopAnswersEveryRequestInFlight) {
  auto idle = OpenRaw(server_.get(), Soon());
  auto completes = OpenRaw(server_.get(), Soon());
  auto stalls = OpenRaw(server_.get(), Soon());
  auto half_head = OpenRaw(server_.get(), Soon());
  ASSERT_TRUE(idle.ok() && completes.ok() && stalls.ok() && half_head.ok());
  proto::PushRequest push = MakePush();
  push.set_pull_after(false);
  const testing::FrameBytes frame = testing::PushFrame(push, 11);
  const size_t half = frame.blobs.size() / 2;
  ASSERT_TRUE(completes->Send(frame.head + frame.blobs.substr(0, half), Soon()).ok());
  ASSERT_TRUE(stalls->Send(frame.head + frame.blobs.substr(0, half), Soon()).ok());
  ASSERT_TRUE(half_head->Send(frame.head.substr(0, 10), Soon()).ok());
  const absl::Duration grace = absl::Seconds(2);
  const absl::Time start = absl::Now();
  std::thread stop([&] { server_->Stop(grace); });
  // The idle connection is closed at once.
  EXPECT_TRUE(idle->EndsBy(start + grace / 2));
  // The rest of a request in flight arrives within the grace: served.
  ASSERT_TRUE(completes->Send(frame.blobs.substr(half), Soon()).ok());
  auto served = completes->Receive(Soon());
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->header.call_id, 11u);
  EXPECT_EQ(served->header.code, 0);
  EXPECT_EQ(handler_.last_push().gradients(0).tensor().data(), push.gradients(0).tensor().data());
  EXPECT_TRUE(completes->EndsBy(start + grace + absl::Seconds(1)));
  // The stalled ones: UNAVAILABLE at the end of the grace.
  auto unavailable = stalls->Receive(Soon());
  ASSERT_TRUE(unavailable.ok()) << unavailable.status();
  EXPECT_GE(absl::Now() - start, grace - absl::Milliseconds(50));
  EXPECT_EQ(unavailable->header.call_id, 11u);
  EXPECT_EQ(unavailable->header.code, static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(unavailable->meta, ::testing::HasSubstr("shutting down"));
  auto connection_error = half_head->Receive(Soon());
  ASSERT_TRUE(connection_error.ok()) << connection_error.status();
  EXPECT_EQ(connection_error->header.call_id, 0u);
  EXPECT_EQ(connection_error->header.code, static_cast<int>(absl::StatusCode::kUnavailable));
  stop.join();
  EXPECT_LE(absl::Now() - start, grace + DataServer::kStopMargin + absl::Seconds(1));
}

// The client reads a connection-level error (call_id 0: what a stopping
// server sends when a request's head had not arrived whole) as the call's
// answer, with its code and message, and does not reuse the connection.
TEST(DataClientTest, AConnectionLevelErrorAnswersTheCallAndBreaksTheConnection) {
  auto listener = TcpListener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  std::thread server([&] {
    auto stream = (*listener)->Accept();
    ASSERT_TRUE(stream.ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    auto hello = ReceiveFrameHead(stream->get(), Limits{}, deadline);
    ASSERT_TRUE(hello.ok());
    FrameHeader ok;
    ok.kind = Kind::kHelloOk;
    ASSERT_TRUE(SendFrame(stream->get(), ok, "", {}, deadline).ok());
    char some[10];
    ASSERT_TRUE((*stream)->ReadExact(some, sizeof(some), deadline).ok());
    FrameHeader error;
    error.kind = Kind::kResponse;
    error.call_id = 0;
    error.code = static_cast<int32_t>(absl::StatusCode::kUnavailable);
    ASSERT_TRUE(SendFrame(stream->get(), error, "stopping", {}, deadline).ok());
    (*stream)->ShutdownWrite();
  });
  auto connection = DataConnection::Open("127.0.0.1", (*listener)->port(), "ticket",
                                         absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(connection.ok()) << connection.status();
  proto::PullResponse pulled;
  const absl::Status s =
      (*connection)->Pull(proto::PullRequest(), absl::Now() + absl::Seconds(10), &pulled);
  server.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(), "stopping");
  EXPECT_TRUE((*connection)->broken());
}

}  // namespace
}  // namespace data_channel
}  // namespace psc
