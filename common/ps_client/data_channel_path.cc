#include "common/ps_client/data_channel_path.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/logging.h"
#include "common/base/status_context.h"

namespace psc {
namespace ps_client {
namespace {

// The connection is a socket: its deadlines are the system clock's.
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

absl::Status CallOne(data_channel::DataConnection* c, const proto::PushRequest& request,
                     absl::Time deadline, proto::PushResponse* response) {
  return c->Push(request, deadline, response);
}
absl::Status CallOne(data_channel::DataConnection* c, const proto::PullRequest& request,
                     absl::Time deadline, proto::PullResponse* response) {
  return c->Pull(request, deadline, response);
}

}  // namespace

absl::Status DataChannelPath::Connect(const Attempt& attempt) {
  connection_.reset();
  Attempt negotiate = attempt;
  negotiate.timeout = std::min(attempt.timeout, kConnectTimeout);
  proto::OpenDataChannelResponse offer;
  absl::Status s = control_->OpenDataChannel(&offer, negotiate);
  if (absl::IsFailedPrecondition(s) || absl::IsUnimplemented(s)) {
    unsupported_ = true;  // the shard has none: its ShardTransport from now on
    return absl::OkStatus();
  }
  if (!s.ok()) return s;
  if (offer.tls() != (tls_ != nullptr)) {
    // Plaintext tensors beside a TLS control channel would bypass TLS; a
    // TLS channel this client cannot speak would only fail.
    base::Logf(
        "data channel to %s: the server's channel is %s and this client's %s: Push and "
        "Pull go over gRPC",
        host_, offer.tls() ? "TLS" : "plaintext", tls_ ? "TLS" : "plaintext");
    unsupported_ = true;
    return absl::OkStatus();
  }
  auto connection = data_channel::DataConnection::Open(host_, offer.port(), offer.ticket(),
                                                       absl::Now() + negotiate.timeout, tls_.get());
  if (!connection.ok()) {
    return base::Prefix(connection.status(), "data channel");
  }
  connection_ = *std::move(connection);
  return absl::OkStatus();
}

template <typename Request, typename Response>
std::optional<absl::Status> DataChannelPath::Call(const Request& request, Response* response,
                                                  const Attempt& attempt) {
  if (!mu_.TryLock()) return std::nullopt;  // busy: this call goes over the ShardTransport
  std::optional<absl::Status> result = CallLocked(request, response, attempt);
  mu_.Unlock();
  return result;
}

template <typename Request, typename Response>
std::optional<absl::Status> DataChannelPath::CallLocked(const Request& request, Response* response,
                                                        const Attempt& attempt) {
  if (unsupported_) return std::nullopt;
  if (connection_ == nullptr || connection_->broken()) {
    absl::Status s = Connect(attempt);
    if (unsupported_) return std::nullopt;
    if (!s.ok()) return s;
  }
  data_channel::DataConnection* c = connection_.get();
  CancelScope scope(attempt, [c] { c->Abort(); });
  if (!scope.ok()) return absl::CancelledError("cancelled");
  {
    absl::MutexLock lock(&calls_mu_);
    ++calls_;
  }
  return CallOne(c, request, absl::Now() + attempt.timeout, response);
}

std::optional<absl::Status> DataChannelPath::Push(const proto::PushRequest& request,
                                                  proto::PushResponse* response,
                                                  const Attempt& attempt) {
  return Call(request, response, attempt);
}

std::optional<absl::Status> DataChannelPath::Pull(const proto::PullRequest& request,
                                                  proto::PullResponse* response,
                                                  const Attempt& attempt) {
  return Call(request, response, attempt);
}

int64_t DataChannelPath::calls() const {
  absl::MutexLock lock(&calls_mu_);
  return calls_;
}

}  // namespace ps_client
}  // namespace psc
