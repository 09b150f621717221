#include "common/data_channel/data_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/data_channel/frame_io.h"

namespace psc {
namespace data_channel {
namespace {

// The request's timeout for the server, in whole milliseconds (at least 1);
// 0 = none. The server is asked to give up a fifth of the time left (at most
// 1 s) before the caller's deadline, so that its DEADLINE_EXCEEDED answer
// arrives in time and the connection stays usable; with the same deadline on
// both ends, a loaded machine delivers that answer late and the connection
// must be dropped.
int32_t TimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return 0;
  const absl::Duration left = deadline - absl::Now();
  const absl::Duration margin = std::min(left / 5, absl::Seconds(1));
  const int64_t ms = absl::ToInt64Milliseconds(left - margin);
  return static_cast<int32_t>(std::clamp<int64_t>(ms, 1, INT32_MAX));
}

absl::Status ServerError(const FrameHead& head) {
  const int code = head.header.code;
  const absl::StatusCode status_code =
      code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  return absl::Status(status_code, head.meta);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataConnection>> DataConnection::Open(const std::string& host,
                                                                     int port,
                                                                     const std::string& ticket,
                                                                     absl::Time deadline,
                                                                     const TlsConfig* tls) {
  PSC_ASSIGN_OR_RETURN(auto stream, ConnectTcp(host, port, deadline));
  if (tls != nullptr) {
    PSC_RETURN_IF_ERROR(stream->StartTls(tls->client(), /*server=*/false, host, deadline));
  }
  FrameHeader hello;
  hello.kind = Kind::kHello;
  PSC_RETURN_IF_ERROR(SendFrame(stream.get(), hello, ticket, {}, deadline));
  PSC_ASSIGN_OR_RETURN(auto head, ReceiveFrameHead(stream.get(), Limits{}, deadline));
  if (head.header.kind == Kind::kResponse && head.header.code != 0) return ServerError(head);
  if (head.header.kind != Kind::kHelloOk) {
    return absl::InternalError("data channel: the server did not answer the hello");
  }
  return std::unique_ptr<DataConnection>(new DataConnection(std::move(stream)));
}

template <typename Response>
absl::Status DataConnection::Call(Kind kind, const std::string& meta,
                                  absl::Span<const absl::string_view> blobs, absl::Time deadline,
                                  Response* response) {
  if (broken()) return absl::UnavailableError("data channel: connection is broken");
  FrameHeader h;
  h.kind = kind;
  h.call_id = next_call_++;
  h.code = TimeoutMs(deadline);
  // Whatever fails from here on leaves the stream out of step.
  auto fail = [this](absl::Status s) {
    broken_ = true;
    stream_->Shutdown();
    return s;
  };
  if (absl::Status s = SendFrame(stream_.get(), h, meta, blobs, deadline); !s.ok()) {
    // A server that ends the connection answers first (a refusal, or
    // UNAVAILABLE while it shuts down) and then stops reading: that answer,
    // if it came, says more than the failed send.
    auto answer = ReceiveFrameHead(stream_.get(), Limits{}, absl::Now() + absl::Milliseconds(200));
    if (answer.ok() && answer->header.kind == Kind::kResponse && answer->header.code != 0 &&
        (answer->header.call_id == h.call_id || answer->header.call_id == 0)) {
      return fail(ServerError(*answer));
    }
    return fail(s);
  }
  auto head = ReceiveFrameHead(stream_.get(), Limits{}, deadline);
  if (!head.ok()) return fail(head.status());
  if (head->header.kind == Kind::kResponse && head->header.call_id == 0 && head->header.code != 0) {
    // An error of the connection's, not of this call's (the server stopped
    // before this request's head arrived whole): the connection is done.
    return fail(ServerError(*head));
  }
  if (head->header.kind != Kind::kResponse || head->header.call_id != h.call_id) {
    return fail(absl::InternalError(
        absl::StrCat("data channel: answer to call ", head->header.call_id, ", want ", h.call_id)));
  }
  if (head->header.code != 0) {
    if (head->header.num_blobs != 0)
      return fail(absl::InternalError("data channel: bad error frame"));
    return ServerError(*head);
  }
  // Keep the buffers of a response passed in again, so that receiving into
  // them needs no zeroing (ReceiveBlobs).
  std::vector<std::string*> old = TensorDataSlots(response->mutable_variables());
  if (spare_.size() < old.size()) spare_.resize(old.size());
  for (size_t i = 0; i < old.size(); ++i) old[i]->swap(spare_[i]);
  if (!response->ParseFromString(head->meta)) {
    return fail(absl::InternalError("data channel: unparsable response"));
  }
  const std::vector<std::string*> slots = TensorDataSlots(response->mutable_variables());
  for (size_t i = 0; i < slots.size() && i < spare_.size(); ++i) slots[i]->swap(spare_[i]);
  if (absl::Status s = ReceiveBlobs(stream_.get(), *head, slots, deadline); !s.ok()) {
    return fail(s);
  }
  return absl::OkStatus();
}

absl::Status DataConnection::Push(const proto::PushRequest& request, absl::Time deadline,
                                  proto::PushResponse* response) {
  // Everything but the gradients' bytes goes in the metadata.
  proto::PushRequest meta;
  *meta.mutable_id() = request.id();
  meta.set_computed_on_version(request.computed_on_version());
  meta.set_worker_clock(request.worker_clock());
  meta.set_pull_after(request.pull_after());
  meta.set_pull_min_version(request.pull_min_version());
  meta.set_pull_wire_dtype(request.pull_wire_dtype());
  meta.set_pull_skip_frozen(request.pull_skip_frozen());
  meta.set_pull_skip_row_sparse(request.pull_skip_row_sparse());
  meta.set_step_refused(request.step_refused());
  if (request.has_clock_worker()) meta.set_clock_worker(request.clock_worker());
  meta.set_ends_unit(request.ends_unit());
  meta.set_gradients_overflow(request.gradients_overflow());
  meta.set_loss_scale(request.loss_scale());
  std::vector<absl::string_view> blobs;
  SplitTensors(request.gradients(), meta.mutable_gradients(), &blobs);
  return Call(Kind::kPush, meta.SerializeAsString(), blobs, deadline, response);
}

absl::Status DataConnection::Pull(const proto::PullRequest& request, absl::Time deadline,
                                  proto::PullResponse* response) {
  return Call(Kind::kPull, request.SerializeAsString(), {}, deadline, response);
}

}  // namespace data_channel
}  // namespace psc
