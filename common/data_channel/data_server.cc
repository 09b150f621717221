#include "common/data_channel/data_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/checked_size.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/cluster/auth_token.h"
#include "common/data_channel/frame_io.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace data_channel {
namespace {

// Beyond this a frame is garbage and the connection is closed; below it, a
// push over options.max_request_bytes is read, dropped and refused.
constexpr uint64_t kMaxFrameBlobBytes = uint64_t{16} << 30;
// A hello carries a ticket (a few dozen bytes) and no tensors.
constexpr uint32_t kMaxHelloMetaBytes = 1024;

// Each blob of a push must hold exactly the bytes of its tensor's declared
// shape (overflow-checked), so that what a frame announces is bounded by
// what its request carries.
absl::Status CheckBlobsMatchShapes(const proto::PushRequest& meta,
                                   absl::Span<const uint64_t> blob_sizes) {
  if (static_cast<size_t>(meta.gradients_size()) != blob_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: frame carries ",
                                                   blob_sizes.size(), " tensors' bytes for ",
                                                   meta.gradients_size(), " gradients"));
  }
  for (int i = 0; i < meta.gradients_size(); ++i) {
    const proto::NamedTensor& g = meta.gradients(i);
    const std::string what = absl::StrCat("gradient for \"", g.name(), "\"");
    // float32, or a wire dtype's 2 bytes (tensor/wire_dtype.h).
    absl::StatusOr<int64_t> element =
        tensor::WireElementBytes(tensor::WireDtypeOrFloat32(g.tensor().dtype()));
    if (!element.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data channel: ", what, ": ", element.status().message()));
    }
    PSC_ASSIGN_OR_RETURN(uint64_t want,
                         base::ByteSize(g.tensor().shape(), static_cast<size_t>(*element),
                                        base::kMaxTensorBytes, absl::StrCat(what, ": shape")));
    if (!g.tensor().indices().empty()) {
      // Sparse (--topk_ratio): one value per index, at most the shape's.
      const uint64_t values = g.tensor().indices().size() / sizeof(uint32_t);
      if (g.tensor().indices().size() % sizeof(uint32_t) != 0 ||
          values > want / static_cast<uint64_t>(*element)) {
        return absl::InvalidArgumentError(absl::StrCat("data channel: ", what, " has ",
                                                       g.tensor().indices().size(),
                                                       " bytes of indices for its shape"));
      }
      want = values * static_cast<uint64_t>(*element);
    }
    if (g.tensor().row_sparse()) {
      // Row-sparse: whole rows, at most the shape's (row_sparse.h).
      const int64_t rows_declared = g.tensor().shape().empty() ? 0 : g.tensor().shape(0);
      const uint64_t rows = g.tensor().row_ids().size() / sizeof(int64_t);
      if (rows_declared < 1 || g.tensor().row_ids().size() % sizeof(int64_t) != 0 ||
          rows > static_cast<uint64_t>(rows_declared)) {
        return absl::InvalidArgumentError(absl::StrCat("data channel: ", what, " has ",
                                                       g.tensor().row_ids().size(),
                                                       " bytes of row ids for its shape"));
      }
      want = want / static_cast<uint64_t>(rows_declared) * rows;
    }
    if (blob_sizes[i] != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data channel: ", what, " announces ", blob_sizes[i], " bytes; its shape holds ", want));
    }
  }
  return absl::OkStatus();
}

absl::Status DiscardBytes(SocketStream* stream, uint64_t n, absl::Time deadline) {
  std::string sink(std::min<uint64_t>(n, 1 << 20), '\0');
  while (n > 0) {
    const size_t take = std::min<uint64_t>(n, sink.size());
    PSC_RETURN_IF_ERROR(stream->ReadExact(sink.data(), take, deadline));
    n -= take;
  }
  return absl::OkStatus();
}

absl::Status SendError(SocketStream* stream, uint64_t call_id, const absl::Status& error,
                       absl::Time deadline) {
  FrameHeader h;
  h.kind = Kind::kResponse;
  h.call_id = call_id;
  h.code = static_cast<int32_t>(error.code());
  return SendFrame(stream, h, error.message(), {}, deadline);
}

// The answer to a request the server could not finish receiving before it
// stopped: retryable, against another incarnation of the server.
absl::Status Stopped() {
  return absl::UnavailableError(
      "data channel: the server is shutting down (the request did not arrive within "
      "--shutdown_grace)");
}

// What is read and dropped of a peer's bytes before a connection the server
// ends is closed (a lingering close, as HTTP servers do): enough for the
// peer to finish sending what it had started and read the answer, rather
// than have the close reset the connection before it does.
constexpr uint64_t kLingerBytes = uint64_t{4} << 20;
constexpr absl::Duration kLingerTime = absl::Seconds(1);

void Linger(SocketStream* stream) {
  stream->ShutdownWrite();
  const absl::Time deadline = absl::Now() + kLingerTime;
  char sink[16 << 10];
  for (uint64_t dropped = 0; dropped < kLingerBytes; dropped += sizeof(sink)) {
    // Whatever arrives is dropped, a partial chunk included: ReadExact ends
    // at the end of the stream (UNAVAILABLE) or at the deadline.
    if (!stream->ReadExact(sink, sizeof(sink), deadline).ok()) return;
  }
}

// Sends `response` with its variables' bytes as blobs; the bytes are moved
// out for the metadata and back afterwards (no copy), so the response keeps
// its buffers for the next call.
template <typename Response>
absl::Status SendResponse(SocketStream* stream, uint64_t call_id, Response* response,
                          std::vector<std::string>* storage, absl::Time deadline) {
  storage->clear();
  TakeTensorData(response->mutable_variables(), storage);
  const std::string meta = response->SerializeAsString();
  FrameHeader h;
  h.kind = Kind::kResponse;
  h.call_id = call_id;
  h.code = 0;
  const std::vector<absl::string_view> blobs = Views(*storage);
  absl::Status sent = SendFrame(stream, h, meta, blobs, deadline);
  for (int i = 0; i < response->variables_size(); ++i) {
    response->mutable_variables(i)->mutable_tensor()->mutable_data()->swap((*storage)[i]);
  }
  return sent;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(const DataServerOptions& options,
                                                              DataHandler* handler) {
  PSC_ASSIGN_OR_RETURN(auto listener, TcpListener::Listen(options.host, options.port));
  std::unique_ptr<DataServer> server(new DataServer(options, handler, std::move(listener)));
  if (pipe2(server->drain_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("data channel: pipe: ", std::strerror(errno)));
  }
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

DataServer::DataServer(const DataServerOptions& options, DataHandler* handler,
                       std::unique_ptr<TcpListener> listener)
    : options_(options),
      handler_(handler),
      listener_(std::move(listener)),
      limits_{Limits{}.max_meta_bytes, Limits{}.max_blobs, kMaxFrameBlobBytes},
      hello_limits_{kMaxHelloMetaBytes, 0, 0} {}

DataServer::~DataServer() {
  Stop();
  for (int fd : drain_) {
    if (fd >= 0) close(fd);
  }
}

bool DataServer::AllDone() const {
  for (const Connection& c : connections_) {
    if (!c.done) return false;
  }
  return true;
}

void DataServer::Stop(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  listener_->Shutdown();
  if (acceptor_.joinable()) acceptor_.join();
  // DRAINING: idle connections see the pipe and close; requests in flight
  // go on to their answers.
  const char wake = 'd';
  (void)!write(drain_[1], &wake, 1);
  const absl::Time grace_end = absl::Now() + std::max(grace, absl::ZeroDuration());
  std::list<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(this, &DataServer::AllDone), grace_end);
    // STOPPING: what is still being received ends now, answered UNAVAILABLE
    // by its thread.
    stopping_.store(true);
    for (Connection& c : connections_) {
      if (!c.done) c.stream->ShutdownRead();
    }
    mu_.AwaitWithDeadline(absl::Condition(this, &DataServer::AllDone), absl::Now() + kStopMargin);
    for (Connection& c : connections_) {
      if (!c.done) c.stream->Shutdown();  // a peer that reads nothing: no answer to give
    }
    connections.swap(connections_);
  }
  for (Connection& c : connections) {
    if (c.thread.joinable()) c.thread.join();
  }
}

int64_t DataServer::connections_accepted() const {
  absl::MutexLock lock(&mu_);
  return accepted_;
}

absl::StatusOr<std::string> DataServer::IssueTicket() {
  PSC_ASSIGN_OR_RETURN(auto ticket, cluster::GenerateAuthToken());
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  absl::erase_if(tickets_, [now](const auto& t) { return t.second < now; });
  tickets_[ticket] = now + options_.ticket_ttl;
  return ticket;
}

bool DataServer::RedeemTicket(const std::string& ticket) {
  absl::MutexLock lock(&mu_);
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return false;
  const bool valid = it->second >= absl::Now();
  tickets_.erase(it);
  return valid;
}

void DataServer::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void DataServer::AcceptLoop() {
  for (;;) {
    auto stream = listener_->Accept();
    if (!stream.ok()) {
      if (!absl::IsCancelled(stream.status())) {
        base::Logf("data channel: %s; no longer accepting connections", stream.status().message());
      }
      return;
    }
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    ReapFinished();
    ++accepted_;
    Connection& c = connections_.emplace_back();
    c.stream = *std::move(stream);
    c.thread = std::thread([this, &c] { Serve(&c); });
  }
}

absl::Status DataServer::Hello(SocketStream* stream) {
  const absl::Time deadline = absl::Now() + options_.hello_timeout;
  if (options_.tls != nullptr) {
    if (absl::Status s = stream->StartTls(options_.tls->server(), /*server=*/true, "", deadline);
        !s.ok()) {
      // A peer without the cluster's certificate: nothing is read from it.
      base::Logf("%s", s.message());  // "data channel: TLS handshake: ..."
      return s;
    }
  }
  // Draining: a connection that has sent nothing yet is closed.
  PSC_ASSIGN_OR_RETURN(const bool readable, stream->WaitReadable(drain_[0], deadline));
  if (!readable) return absl::UnavailableError("data channel: the server is stopping");
  // The header alone first: its kind decides, before any size is checked
  // and without reading what the frame announces.
  char raw[kHeaderBytes];
  PSC_RETURN_IF_ERROR(stream->ReadExact(raw, sizeof(raw), deadline));
  const Limits any{~uint32_t{0}, ~uint32_t{0}, ~uint64_t{0}};
  absl::StatusOr<FrameHeader> header = DecodeFrameHeader(absl::string_view(raw, sizeof(raw)), any);
  if (!header.ok()) {  // not this protocol
    (void)SendError(stream, 0, header.status(), deadline);
    return header.status();
  }
  if (header->kind != Kind::kHello) {
    absl::Status error = absl::UnauthenticatedError(
        "data channel: the first frame must be a hello with a ticket from OpenDataChannel");
    (void)SendError(stream, header->call_id, error, deadline);
    return error;
  }
  if (header->num_blobs != 0 || header->meta_bytes > hello_limits_.max_meta_bytes) {
    absl::Status error = absl::UnauthenticatedError(
        absl::StrCat("data channel: a hello carries a ticket of at most ",
                     hello_limits_.max_meta_bytes, " bytes and no tensors"));
    (void)SendError(stream, header->call_id, error, deadline);
    return error;
  }
  std::string ticket;
  PSC_RETURN_IF_ERROR(ReadAsItArrives(stream, header->meta_bytes, &ticket, deadline));
  if (!RedeemTicket(ticket)) {
    absl::Status error = absl::UnauthenticatedError(
        "data channel: unknown, used or expired ticket; call OpenDataChannel again");
    (void)SendError(stream, header->call_id, error, deadline);
    return error;
  }
  FrameHeader ok;
  ok.kind = Kind::kHelloOk;
  ok.call_id = header->call_id;
  return SendFrame(stream, ok, "", {}, deadline);
}

absl::Status DataServer::ServeOne(SocketStream* stream, const FrameHead& head, Scratch* scratch) {
  const FrameHeader& h = head.header;
  if (stopping_.load()) {  // past the grace: not started
    (void)SendError(stream, h.call_id, Stopped(), absl::Now() + absl::Seconds(1));
    return Stopped();
  }
  const absl::Duration wait =
      h.code > 0 ? std::min(absl::Milliseconds(h.code), options_.max_wait) : options_.max_wait;
  const absl::Time deadline = absl::Now() + wait;
  const absl::Time send_deadline = absl::Now() + options_.send_timeout;
  switch (h.kind) {
    case Kind::kPush: {
      proto::PushRequest& request = scratch->push;
      if (!request.ParseFromString(head.meta)) {
        absl::Status error = absl::InvalidArgumentError("data channel: unparsable PushRequest");
        (void)SendError(stream, h.call_id, error, send_deadline);
        return error;
      }
      // A push that cannot be taken (oversized, or announcing bytes its
      // request cannot legitimately carry) is answered at once and its bytes
      // are read and dropped without being stored, so the answer is
      // INVALID_ARGUMENT on a connection that goes on, not a reset that the
      // client would retry, and memory is never reserved for bytes a peer
      // has only announced.
      absl::StatusOr<uint64_t> total =
          base::BoundedSum(head.blob_sizes, options_.max_request_bytes, "push");
      absl::Status refused;
      if (!total.ok()) {
        uint64_t announced = 0;
        for (uint64_t n : head.blob_sizes) announced += n;  // < 2^64: each <= kMaxFrameBlobBytes
        refused = absl::InvalidArgumentError(
            absl::StrCat("push of ", announced, " bytes exceeds the limit of ",
                         options_.max_request_bytes, " (--max_request_mb)"));
        total = announced;
      } else if (absl::Status s = CheckBlobsMatchShapes(request, head.blob_sizes); !s.ok()) {
        refused = s;
      } else if (absl::Status s = handler_->CheckPush(request); !s.ok()) {
        refused = s;
      }
      if (!refused.ok()) {
        PSC_RETURN_IF_ERROR(SendError(stream, h.call_id, refused, send_deadline));
        return DiscardBytes(stream, *total, absl::Now() + options_.send_timeout);
      }
      // The gradients' bytes land in the connection's buffers (reused
      // call after call), lent to the request for the handler.
      std::vector<std::string>& buffers = scratch->gradients;
      if (buffers.size() < static_cast<size_t>(request.gradients_size())) {
        buffers.resize(request.gradients_size());
      }
      std::vector<std::string*> slots;
      for (int i = 0; i < request.gradients_size(); ++i) slots.push_back(&buffers[i]);
      if (absl::Status s = ReceiveBlobs(stream, head, slots, absl::Now() + options_.send_timeout);
          !s.ok()) {
        if (absl::IsInvalidArgument(s)) (void)SendError(stream, h.call_id, s, send_deadline);
        if (stopping_.load()) (void)SendError(stream, h.call_id, Stopped(), send_deadline);
        return s;
      }
      const std::vector<std::string*> data = TensorDataSlots(request.mutable_gradients());
      for (size_t i = 0; i < data.size(); ++i) data[i]->swap(buffers[i]);
      absl::Cleanup give_back = [&] {
        for (size_t i = 0; i < data.size(); ++i) data[i]->swap(buffers[i]);
      };
      proto::PushResponse& response = scratch->push_response;
      response.Clear();
      absl::Status s = handler_->Push(request, deadline, &response);
      if (!s.ok()) return SendError(stream, h.call_id, s, absl::Now() + options_.send_timeout);
      return SendResponse(stream, h.call_id, &response, &scratch->storage,
                          absl::Now() + options_.send_timeout);
    }
    case Kind::kPull: {
      proto::PullRequest& request = scratch->pull;
      if (h.num_blobs != 0 || !request.ParseFromString(head.meta)) {
        absl::Status error = absl::InvalidArgumentError("data channel: malformed PullRequest");
        (void)SendError(stream, h.call_id, error, send_deadline);
        return error;
      }
      proto::PullResponse& response = scratch->pull_response;
      response.Clear();
      absl::Status s = handler_->Pull(request, deadline, &response);
      if (!s.ok()) return SendError(stream, h.call_id, s, absl::Now() + options_.send_timeout);
      return SendResponse(stream, h.call_id, &response, &scratch->storage,
                          absl::Now() + options_.send_timeout);
    }
    default: {
      absl::Status error = absl::InvalidArgumentError(
          absl::StrCat("data channel: unexpected frame kind ", static_cast<int>(h.kind)));
      (void)SendError(stream, h.call_id, error, send_deadline);
      return error;
    }
  }
}

void DataServer::Serve(Connection* connection) {
  SocketStream* stream = connection->stream.get();
  bool linger = true;  // whether the peer may still be sending (an answer to read)
  if (absl::Status s = Hello(stream); s.ok()) {
    Scratch scratch;  // reused by every call, so its buffers are
    for (;;) {
      // Between requests: until the next one's first bytes, or the drain.
      absl::StatusOr<bool> next = stream->WaitReadable(drain_[0], absl::InfiniteFuture());
      // Past the grace (the read side shut down): only a request whose bytes
      // have arrived is read, to be answered UNAVAILABLE.
      if (!next.ok() || !*next || (stopping_.load() && !stream->HasInput())) {
        linger = false;  // idle: nothing of the peer's is unanswered
        break;
      }
      auto head = ReceiveFrameHead(stream, limits_, absl::Now() + options_.send_timeout);
      if (!head.ok()) {
        if (absl::IsInvalidArgument(head.status())) {
          (void)SendError(stream, 0, head.status(), absl::Now() + absl::Seconds(1));
        } else if (stopping_.load()) {
          // Its head had not arrived whole: answered on the connection.
          (void)SendError(stream, 0, Stopped(), absl::Now() + absl::Seconds(1));
        }
        break;
      }
      if (!ServeOne(stream, *head, &scratch).ok()) break;
    }
  }
  // The peer reads the last answer before the end (Linger), not a reset.
  // Closing (not only shutting down) the socket afterwards makes the kernel
  // reset a peer that is still sending. The stream object stays in
  // connections_ until the thread is joined (ReapFinished, Stop): it is
  // never held by this thread alone once the peer can see the end
  // (LeakSanitizer, in the data channel fuzzer, took such a moment for a
  // leak).
  if (linger && !stream->is_shut_down()) Linger(stream);
  absl::MutexLock lock(&mu_);
  connection->stream->Close();
  connection->done = true;
}

}  // namespace data_channel
}  // namespace psc
