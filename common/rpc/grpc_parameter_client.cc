#include "common/rpc/grpc_parameter_client.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {

GrpcParameterClient::GrpcParameterClient(const std::vector<std::string>& addresses,
                                         const SecurityOptions& security,
                                         absl::Duration retry_window)
    : security_(security), retry_window_(retry_window), addresses_(addresses) {
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::ParameterServer::NewStub(CreateChannel(a, security)));
  }
}

// Runs `call(context)` until it is not UNAVAILABLE or the retry window is
// over. Each attempt gets `timeout`; wait_for_ready lets an attempt ride
// out a reconnect instead of failing at once.
template <typename Call>
absl::Status GrpcParameterClient::WithRetries(int shard, absl::Duration timeout, const char* what,
                                              Call call) {
  if (shard < 0 || shard >= num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("no shard ", shard));
  }
  const absl::Time give_up = absl::Now() + retry_window_;
  Backoff backoff({absl::Milliseconds(100), 2.0, absl::Seconds(2), 0.2}, shard + 1);
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
    grpc::Status s = call(&context);
    {
      absl::MutexLock lock(&mu_);
      in_flight_.erase(&context);
      if (cancelled_)
        return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
    }
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
  std::vector<absl::Status> statuses(requests.size());
  auto call = [&](int i) {
    statuses[i] = WithRetries(i, timeout, what, [&](grpc::ClientContext* c) {
      return (stubs_[i].get()->*method)(c, requests[i], &(*responses)[i]);
    });
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < num_shards(); ++i) threads.emplace_back(call, i);
  call(0);
  for (auto& t : threads) t.join();
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
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

}  // namespace psc
