#include "worker/grpc_store_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace worker {
namespace {

constexpr absl::Duration kStoreCallTimeout = absl::Seconds(5);
// One StoreGet's wait on the server (it caps it at 200 ms too).
constexpr absl::Duration kPollWait = absl::Milliseconds(200);
// Between attempts after a failed call (the coordinator restarting).
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);

}  // namespace

GrpcStoreClient::GrpcStoreClient(const std::string& coordinator_address,
                                 const rpc::SecurityOptions& security)
    : security_(security),
      address_(coordinator_address),
      stub_(proto::Coordinator::NewStub(rpc::CreateChannel(coordinator_address, security))) {}

absl::Status GrpcStoreClient::Set(const std::string& key, const std::string& value) {
  proto::StoreSetRequest request;
  request.set_key(key);
  request.set_value(value);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kStoreCallTimeout);
  proto::StoreSetResponse response;
  return rpc::FromGrpcStatus(stub_->StoreSet(&context, request, &response),
                             absl::StrCat("coordinator (", address_, ") StoreSet \"", key, "\""));
}

absl::StatusOr<std::string> GrpcStoreClient::Get(const std::string& key, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + std::max(wait, absl::ZeroDuration());
  absl::Status last;
  // Bounded by the deadline: each attempt takes at least kPollWait or
  // kRetryPause, or ends the loop.
  for (int attempt = 0;; ++attempt) {
    const absl::Duration left = deadline - absl::Now();
    proto::StoreGetRequest request;
    request.set_key(key);
    request.set_wait_ms(
        absl::ToInt64Milliseconds(std::clamp(left, absl::ZeroDuration(), kPollWait)));
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security_, kStoreCallTimeout);
    proto::StoreGetResponse response;
    last = rpc::FromGrpcStatus(stub_->StoreGet(&context, request, &response),
                               absl::StrCat("coordinator (", address_, ") StoreGet \"", key, "\""));
    if (last.ok()) return std::move(*response.mutable_value());
    const bool retry = absl::IsDeadlineExceeded(last) || absl::IsUnavailable(last);
    if (!retry || absl::Now() >= deadline) break;
    if (!absl::IsDeadlineExceeded(last))
      absl::SleepFor(std::min(kRetryPause, deadline - absl::Now()));
  }
  if (absl::IsDeadlineExceeded(last)) {
    return absl::DeadlineExceededError(absl::StrCat("store key \"", key, "\" was not set within ",
                                                    absl::FormatDuration(wait), " (coordinator ",
                                                    address_, ")"));
  }
  return last;
}

}  // namespace worker
}  // namespace psc
