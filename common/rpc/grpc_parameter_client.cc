#include "common/rpc/grpc_parameter_client.h"

#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/backoff.h"
#include "common/cluster/host_port.h"
#include "common/rpc/call_group.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace rpc {
namespace {

absl::Status GroupCancelled(int shard, const char* what) {
  return absl::CancelledError(
      absl::StrCat("ps:", shard, " ", what, ": cancelled, another shard's call failed"));
}

}  // namespace

GrpcParameterClient::GrpcParameterClient(const std::vector<std::string>& addresses,
                                         const SecurityOptions& security,
                                         absl::Duration retry_window, bool data_channel)
    : security_(security),
      retry_window_(retry_window),
      addresses_(addresses),
      data_channel_(data_channel && !security.tls) {
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::ParameterServer::NewStub(CreateChannel(a, security)));
    links_.push_back(std::make_unique<DataLink>());
  }
}

// Runs `call(context)` until it is not UNAVAILABLE or the retry window is
// over. Each attempt gets `timeout`; wait_for_ready lets an attempt ride
// out a reconnect instead of failing at once.
template <typename Call>
absl::Status GrpcParameterClient::WithRetries(int shard, absl::Duration timeout, const char* what,
                                              Call call, CallGroup* group) {
  if (shard < 0 || shard >= num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("no shard ", shard));
  }
  const absl::Time give_up = absl::Now() + retry_window_;
  base::Backoff backoff({absl::Milliseconds(100), 2.0, absl::Seconds(2), 0.2}, shard + 1);
  for (;;) {
    grpc::ClientContext context;
    PrepareContext(&context, security_, timeout);
    context.set_wait_for_ready(true);
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_)
        return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
      in_flight_.insert(&context);
    }
    if (group != nullptr && !group->Add(&context)) {
      absl::MutexLock lock(&mu_);
      in_flight_.erase(&context);
      return GroupCancelled(shard, what);
    }
    grpc::Status s = call(&context);
    if (group != nullptr) group->Remove(&context);
    {
      absl::MutexLock lock(&mu_);
      in_flight_.erase(&context);
      if (cancelled_)
        return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
    }
    if (group != nullptr && group->failed()) return GroupCancelled(shard, what);
    if (s.ok()) return absl::OkStatus();
    const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE && absl::Now() < give_up;
    if (!retry) {
      return FromGrpcStatus(s, absl::StrCat("ps:", shard, " (", addresses_[shard], ") ", what));
    }
    absl::SleepFor(std::min(backoff.Next(), give_up - absl::Now()));
  }
}

void GrpcParameterClient::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* c : in_flight_) c->TryCancel();
  for (data_channel::DataConnection* c : data_in_flight_) c->Abort();
}

int64_t GrpcParameterClient::data_channel_calls() const {
  absl::MutexLock lock(&mu_);
  return data_channel_calls_;
}

namespace {

absl::Status DataCallOne(data_channel::DataConnection* c, const proto::PushRequest& request,
                         absl::Time deadline, proto::PushResponse* response) {
  return c->Push(request, deadline, response);
}
absl::Status DataCallOne(data_channel::DataConnection* c, const proto::PullRequest& request,
                         absl::Time deadline, proto::PullResponse* response) {
  return c->Pull(request, deadline, response);
}

}  // namespace

absl::Status GrpcParameterClient::OpenDataConnection(int shard, DataLink& link, CallGroup* group) {
  link.connection.reset();
  proto::OpenDataChannelResponse offer;
  absl::Status s = WithRetries(
      shard, absl::Seconds(10), "OpenDataChannel",
      [&](grpc::ClientContext* c) {
        return stubs_[shard]->OpenDataChannel(c, proto::OpenDataChannelRequest(), &offer);
      },
      group);
  if (absl::IsFailedPrecondition(s) || absl::IsUnimplemented(s)) {
    link.unsupported = true;  // the shard has none: gRPC from now on
    return absl::OkStatus();
  }
  if (!s.ok()) return s;
  auto host = cluster::ParseHostPort(addresses_[shard]);
  if (!host.ok()) return host.status();
  auto connection = data_channel::DataConnection::Open(host->host, offer.port(), offer.ticket(),
                                                       absl::Now() + absl::Seconds(10));
  if (!connection.ok()) {
    return absl::Status(connection.status().code(),
                        absl::StrCat("ps:", shard, " (", addresses_[shard],
                                     ") data channel: ", connection.status().message()));
  }
  link.connection = *std::move(connection);
  return absl::OkStatus();
}

// Like WithRetries, over the data channel: UNAVAILABLE (the connection or the
// shard went away) is retried, on a fresh connection, until the retry window
// is over; a retried push is safe (exactly-once).
template <typename Request, typename Response>
std::optional<absl::Status> GrpcParameterClient::DataCall(int shard, const Request& request,
                                                          Response* response,
                                                          absl::Duration timeout, const char* what,
                                                          CallGroup* group) {
  if (!data_channel_) return std::nullopt;
  DataLink& link = *links_[shard];
  if (!link.mu.TryLock()) return std::nullopt;  // busy: this call goes over gRPC
  absl::Cleanup unlock = [&link]() ABSL_NO_THREAD_SAFETY_ANALYSIS { link.mu.Unlock(); };
  const absl::Time give_up = absl::Now() + retry_window_;
  base::Backoff backoff({absl::Milliseconds(100), 2.0, absl::Seconds(2), 0.2}, shard + 1);
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (cancelled_)
        return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
    }
    if (group != nullptr && group->failed()) return GroupCancelled(shard, what);
    absl::Status s;
    if (link.connection == nullptr || link.connection->broken()) {
      s = OpenDataConnection(shard, link, group);
      if (s.ok() && link.unsupported) return std::nullopt;
    }
    if (s.ok()) {
      data_channel::DataConnection* c = link.connection.get();
      {
        absl::MutexLock l(&mu_);
        data_in_flight_.insert(c);
        ++data_channel_calls_;
      }
      if (group != nullptr && !group->Add(c)) {
        absl::MutexLock l(&mu_);
        data_in_flight_.erase(c);
        return GroupCancelled(shard, what);
      }
      s = DataCallOne(c, request, absl::Now() + timeout, response);
      if (group != nullptr) group->Remove(c);
      absl::MutexLock l(&mu_);
      data_in_flight_.erase(c);
      if (cancelled_)
        return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
      if (group != nullptr && group->failed()) return GroupCancelled(shard, what);
      if (s.ok()) return s;
      s = absl::Status(s.code(), absl::StrCat("ps:", shard, " (", addresses_[shard], ") ", what,
                                              ": ", s.message()));
    }
    if (!absl::IsUnavailable(s) || absl::Now() >= give_up) return s;
    absl::SleepFor(std::min(backoff.Next(), give_up - absl::Now()));
  }
}

// Sends requests[i] to shard i with `method`, all shards concurrently (the
// calling thread takes shard 0), and waits for every answer.
template <typename Request, typename Response, typename Method>
absl::Status GrpcParameterClient::CallAll(const std::vector<Request>& requests,
                                          std::vector<Response>* responses, absl::Duration timeout,
                                          const char* what, Method method) {
  if (static_cast<int>(requests.size()) != num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs one request per shard"));
  }
  responses->resize(requests.size());
  // The first failure cancels the other shards' calls (call_group.h).
  CallGroup group;
  auto call = [&](int i) {
    absl::Status s;
    if (auto d = DataCall(i, requests[i], &(*responses)[i], timeout, what, &group)) {
      s = *std::move(d);
    } else {
      s = WithRetries(
          i, timeout, what,
          [&](grpc::ClientContext* c) {
            return (stubs_[i].get()->*method)(c, requests[i], &(*responses)[i]);
          },
          &group);
    }
    if (!s.ok()) group.Fail(s);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < num_shards(); ++i) threads.emplace_back(call, i);
  call(0);
  for (auto& t : threads) t.join();
  return group.first_error();
}

absl::Status GrpcParameterClient::PushAll(const std::vector<proto::PushRequest>& requests,
                                          std::vector<proto::PushResponse>* responses,
                                          absl::Duration timeout) {
  return CallAll(requests, responses, timeout, "Push", &proto::ParameterServer::Stub::Push);
}

absl::Status GrpcParameterClient::PullAll(const std::vector<proto::PullRequest>& requests,
                                          std::vector<proto::PullResponse>* responses,
                                          absl::Duration timeout) {
  return CallAll(requests, responses, timeout, "Pull", &proto::ParameterServer::Stub::Pull);
}

absl::Status GrpcParameterClient::Configure(int shard, const proto::ConfigureRequest& request) {
  proto::ConfigureResponse response;
  return WithRetries(shard, absl::Seconds(30), "Configure", [&](grpc::ClientContext* c) {
    return stubs_[shard]->Configure(c, request, &response);
  });
}

absl::Status GrpcParameterClient::CreateVariables(int shard,
                                                  const proto::CreateVariablesRequest& request) {
  proto::CreateVariablesResponse response;
  return WithRetries(shard, absl::Seconds(60), "CreateVariables", [&](grpc::ClientContext* c) {
    return stubs_[shard]->CreateVariables(c, request, &response);
  });
}

absl::Status GrpcParameterClient::UpdateMembership(int shard,
                                                   const proto::UpdateMembershipRequest& request,
                                                   proto::UpdateMembershipResponse* response) {
  return WithRetries(shard, absl::Seconds(30), "UpdateMembership", [&](grpc::ClientContext* c) {
    return stubs_[shard]->UpdateMembership(c, request, response);
  });
}

absl::Status GrpcParameterClient::SaveCheckpoint(int shard,
                                                 const proto::SaveCheckpointRequest& request,
                                                 proto::SaveCheckpointResponse* response) {
  return WithRetries(shard, absl::Minutes(5), "SaveCheckpoint", [&](grpc::ClientContext* c) {
    return stubs_[shard]->SaveCheckpoint(c, request, response);
  });
}

absl::Status GrpcParameterClient::RestoreCheckpoint(int shard,
                                                    const proto::RestoreCheckpointRequest& request,
                                                    proto::RestoreCheckpointResponse* response) {
  return WithRetries(shard, absl::Minutes(5), "RestoreCheckpoint", [&](grpc::ClientContext* c) {
    return stubs_[shard]->RestoreCheckpoint(c, request, response);
  });
}

absl::StatusOr<proto::ShardStats> GrpcParameterClient::GetStats(int shard) {
  proto::ShardStats stats;
  absl::Status s = WithRetries(shard, absl::Seconds(30), "GetStats", [&](grpc::ClientContext* c) {
    return stubs_[shard]->GetStats(c, proto::GetStatsRequest(), &stats);
  });
  if (!s.ok()) return s;
  return stats;
}

}  // namespace rpc
}  // namespace psc
