#include "common/ps_client/parameter_server_client.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/backoff.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"

namespace psc {
namespace ps_client {
namespace {

// Push and Pull: the data path when it takes the call, else the transport.
absl::Status Send(const ShardEndpoint& shard, const proto::PushRequest& request,
                  proto::PushResponse* response, const Attempt& attempt) {
  if (shard.data != nullptr) {
    if (auto carried = shard.data->Push(request, response, attempt)) return *std::move(carried);
  }
  return shard.transport->Push(request, response, attempt);
}

absl::Status Send(const ShardEndpoint& shard, const proto::PullRequest& request,
                  proto::PullResponse* response, const Attempt& attempt) {
  if (shard.data != nullptr) {
    if (auto carried = shard.data->Pull(request, response, attempt)) return *std::move(carried);
  }
  return shard.transport->Pull(request, response, attempt);
}

}  // namespace

ParameterServerClient::ParameterServerClient(std::vector<ShardEndpoint> shards,
                                             ParameterServerClientOptions options)
    : shards_(std::move(shards)),
      retry_window_(options.retry_window),
      clock_(options.clock != nullptr ? options.clock : &real_clock_) {}

template <typename Try>
absl::Status ParameterServerClient::Call(int shard, const char* what, absl::Duration timeout,
                                         CallGroup* group, Try attempt) {
  if (shard < 0 || shard >= num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("no shard ", shard));
  }
  const uint64_t interrupts = interrupts_.load();
  auto cancelled = [&]() -> absl::Status {
    if (cancelled_.cancelled()) {
      return absl::CancelledError(absl::StrCat("ps:", shard, " ", what, ": cancelled"));
    }
    if (interrupts_.load() != interrupts) {
      return absl::CancelledError(
          absl::StrCat("ps:", shard, " ", what, ": cancelled (the calls in flight were ended)"));
    }
    if (group != nullptr && group->failed()) {
      return absl::CancelledError(
          absl::StrCat("ps:", shard, " ", what, ": cancelled, another shard's call failed"));
    }
    return absl::OkStatus();
  };
  const absl::Time give_up = clock_->Now() + retry_window_;
  base::Backoff backoff({absl::Milliseconds(100), 2.0, absl::Seconds(2), 0.2}, shard + 1);
  Attempt a;
  a.timeout = timeout;
  a.scopes[0] = &cancelled_;
  a.scopes[1] = group != nullptr ? group->cancellation() : nullptr;
  for (;;) {
    PSC_RETURN_IF_ERROR(cancelled());
    absl::Status s = attempt(a);
    PSC_RETURN_IF_ERROR(cancelled());
    if (s.ok()) return s;
    if (!absl::IsUnavailable(s) || clock_->Now() >= give_up) {
      return base::Prefix(s, absl::StrCat(shards_[shard].name, " ", what));
    }
    retries_.fetch_add(1);
    clock_->SleepFor(std::min(backoff.Next(), give_up - clock_->Now()));
  }
}

template <typename Request, typename Response>
absl::Status ParameterServerClient::CallAll(const std::vector<Request>& requests,
                                            std::vector<Response>* responses,
                                            absl::Duration timeout, const char* what) {
  if (static_cast<int>(requests.size()) != num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs one request per shard"));
  }
  responses->resize(requests.size());
  CallGroup group;
  auto call = [&](int i) {
    absl::Status s = Call(i, what, timeout, &group, [&](const Attempt& a) {
      return Send(shards_[i], requests[i], &(*responses)[i], a);
    });
    if (!s.ok()) group.Fail(s);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < num_shards(); ++i) threads.emplace_back(call, i);
  call(0);
  for (auto& t : threads) t.join();
  return group.first_error();
}

absl::Status ParameterServerClient::PushAll(const std::vector<proto::PushRequest>& requests,
                                            std::vector<proto::PushResponse>* responses,
                                            absl::Duration timeout) {
  pushes_.fetch_add(1);
  return CallAll(requests, responses, timeout, "Push");
}

absl::Status ParameterServerClient::Push(int shard, const proto::PushRequest& request,
                                         proto::PushResponse* response, absl::Duration timeout) {
  pushes_.fetch_add(1);
  return Call(shard, "Push", timeout, nullptr,
              [&](const Attempt& a) { return Send(shards_[shard], request, response, a); });
}

absl::Status ParameterServerClient::Pull(int shard, const proto::PullRequest& request,
                                         proto::PullResponse* response, absl::Duration timeout) {
  pulls_.fetch_add(1);
  return Call(shard, "Pull", timeout, nullptr,
              [&](const Attempt& a) { return Send(shards_[shard], request, response, a); });
}

absl::Status ParameterServerClient::PullAll(const std::vector<proto::PullRequest>& requests,
                                            std::vector<proto::PullResponse>* responses,
                                            absl::Duration timeout) {
  pulls_.fetch_add(1);
  return CallAll(requests, responses, timeout, "Pull");
}

absl::Status ParameterServerClient::Configure(int shard, const proto::ConfigureRequest& request) {
  return Call(shard, "Configure", absl::Seconds(30), nullptr,
              [&](const Attempt& a) { return shards_[shard].transport->Configure(request, a); });
}

absl::Status ParameterServerClient::CreateVariables(int shard,
                                                    const proto::CreateVariablesRequest& request) {
  return Call(shard, "CreateVariables", absl::Seconds(60), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->CreateVariables(request, a);
  });
}

absl::Status ParameterServerClient::UpdateMembership(int shard,
                                                     const proto::UpdateMembershipRequest& request,
                                                     proto::UpdateMembershipResponse* response) {
  return Call(shard, "UpdateMembership", absl::Seconds(30), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->UpdateMembership(request, response, a);
  });
}

absl::Status ParameterServerClient::SaveCheckpoint(int shard,
                                                   const proto::SaveCheckpointRequest& request,
                                                   proto::SaveCheckpointResponse* response) {
  return Call(shard, "SaveCheckpoint", absl::Minutes(5), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->SaveCheckpoint(request, response, a);
  });
}

absl::Status ParameterServerClient::RestoreCheckpoint(
    int shard, const proto::RestoreCheckpointRequest& request,
    proto::RestoreCheckpointResponse* response) {
  return Call(shard, "RestoreCheckpoint", absl::Minutes(5), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->RestoreCheckpoint(request, response, a);
  });
}

absl::Status ParameterServerClient::ExportState(int shard, const proto::ExportStateRequest& request,
                                                proto::ExportStateResponse* response) {
  return Call(shard, "ExportState", absl::Minutes(5), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->ExportState(request, response, a);
  });
}

absl::Status ParameterServerClient::ImportState(int shard, const proto::ImportStateRequest& request,
                                                proto::ImportStateResponse* response) {
  // A retried import is safe: the same state swapped in again.
  return Call(shard, "ImportState", absl::Minutes(5), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->ImportState(request, response, a);
  });
}

absl::StatusOr<proto::ShardStats> ParameterServerClient::GetStats(int shard) {
  proto::ShardStats stats;
  PSC_RETURN_IF_ERROR(Call(shard, "GetStats", absl::Seconds(30), nullptr, [&](const Attempt& a) {
    return shards_[shard].transport->GetStats(&stats, a);
  }));
  return stats;
}

int64_t ParameterServerClient::data_channel_calls() const {
  int64_t n = 0;
  for (const ShardEndpoint& s : shards_) {
    if (s.data != nullptr) n += s.data->calls();
  }
  return n;
}

}  // namespace ps_client
}  // namespace psc
