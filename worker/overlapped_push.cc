#include "worker/overlapped_push.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/tensor.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<OverlappedPush>> OverlappedPush::Create(
    const ps_client::ShardedParameters* sharded, const std::vector<int>& ready_order,
    int64_t bucket_bytes, ps_client::ParameterClient* client, absl::Duration timeout,
    base::Clock* clock) {
  const int n = static_cast<int>(sharded->variables().size());
  if (static_cast<int>(ready_order.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ready order of ", ready_order.size(), " variables for ", n));
  }
  if (bucket_bytes < 1) return absl::InvalidArgumentError("bucket size must be positive");
  std::unique_ptr<OverlappedPush> p(new OverlappedPush());
  p->sharded_ = sharded;
  if (clock != nullptr) p->clock_ = clock;
  p->bucket_of_.assign(n, -1);
  const int64_t bucket_elements = std::max<int64_t>(1, bucket_bytes / int64_t{sizeof(float)});
  int64_t in_bucket = 0;
  for (int v : ready_order) {
    if (v < 0 || v >= n || p->bucket_of_[v] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ready order is not a permutation of the ", n, " variables"));
    }
    if (p->buckets_.empty() || in_bucket >= bucket_elements) {
      p->buckets_.emplace_back();
      in_bucket = 0;
    }
    p->buckets_.back().push_back(v);
    p->bucket_of_[v] = static_cast<int>(p->buckets_.size()) - 1;
    const int64_t size = tensor::NumElements(sharded->variables()[v].shape);
    in_bucket = size > std::numeric_limits<int64_t>::max() - in_bucket
                    ? std::numeric_limits<int64_t>::max()
                    : in_bucket + size;
  }
  // A bucket is a part of every shard that holds a piece of it, frozen or
  // not: the part's pull brings its variables, and its push their
  // gradients (none for a frozen variable's piece; a part of only those
  // carries no gradient, and still counts toward the push).
  const int shards = sharded->num_shards();
  p->num_parts_.assign(shards, 0);
  for (const std::vector<int>& bucket : p->buckets_) {
    std::vector<int> parts(shards, -1);
    PSC_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> names, sharded->ShardNames(bucket));
    for (int s = 0; s < shards; ++s) {
      if (!names[s].empty()) parts[s] = p->num_parts_[s]++;
    }
    p->part_of_.push_back(std::move(parts));
    p->names_.push_back(std::move(names));
  }
  for (int s = 0; s < shards; ++s) {
    if (p->num_parts_[s] == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps:", s, " holds no variable of the model: nothing to push to it"));
    }
  }
  p->pusher_ = std::make_unique<ps_client::PartPusher>(client, timeout, clock);
  p->pulled_version_.assign(shards, 0);
  p->pulled_.resize(shards);
  p->arrived_.resize(shards);
  for (int s = 0; s < shards; ++s) {
    p->pulled_[s].resize(p->num_parts_[s]);
    p->arrived_[s].assign(p->num_parts_[s], false);
  }
  p->taken_.assign(p->buckets_.size(), false);
  return p;
}

void OverlappedPush::Begin(const std::vector<proto::PushRequest>& headers, proto::DataType wire,
                           const std::vector<std::vector<float>>* grads) {
  headers_ = headers;
  wire_ = wire;
  grads_ = grads;
  missing_.clear();
  for (const std::vector<int>& b : buckets_) missing_.push_back(static_cast<int>(b.size()));
  ready_.assign(bucket_of_.size(), false);
  sent_.assign(num_parts_.size(), 0);
  buckets_sent_ = 0;
}

absl::Status OverlappedPush::Ready(int v) {
  if (v < 0 || v >= static_cast<int>(bucket_of_.size()) || ready_[v]) {
    return absl::InvalidArgumentError(absl::StrCat("variable ", v, " out of range or ready twice"));
  }
  ready_[v] = true;
  const int b = bucket_of_[v];
  if (--missing_[b] > 0) return absl::OkStatus();
  return SendBucket(b);
}

absl::Status OverlappedPush::SendBucket(int b) {
  if (pending_) {
    return absl::FailedPreconditionError(
        "gradients go out while the last step's parameters are still being pulled");
  }
  std::vector<std::vector<proto::NamedTensor>> split;
  if (compressor_ == nullptr) {
    PSC_RETURN_IF_ERROR(sharded_->SplitVariables(*grads_, buckets_[b], wire_, &split));
  } else {
    PSC_RETURN_IF_ERROR(sharded_->SplitVariables(*grads_, buckets_[b], proto::DT_FLOAT32, &split));
    for (std::vector<proto::NamedTensor>& shard : split) {
      PSC_RETURN_IF_ERROR(compressor_->Encode(wire_, &shard));
    }
  }
  for (int s = 0; s < static_cast<int>(split.size()); ++s) {
    const int part = part_of_[b][s];
    if (part < 0) continue;
    proto::PushRequest p = headers_[s];
    p.mutable_id()->set_part(part);
    p.mutable_id()->set_num_parts(num_parts_[s]);
    p.clear_pull_after();
    p.clear_pull_min_version();
    p.clear_pull_wire_dtype();
    p.clear_pull_skip_frozen();
    for (proto::NamedTensor& t : split[s]) *p.add_gradients() = std::move(t);
    pusher_->Send(s, std::move(p));
    if (++sent_[s] < num_parts_[s] || !headers_[s].pull_after()) continue;
    // The shard's push is whole once this part is in (a shard takes one
    // part at a time): its pull follows, the first layers' part first, as
    // ShardServer::Push would pull after a whole push.
    for (int bucket = num_buckets() - 1; bucket >= 0; --bucket) {
      if (part_of_[bucket][s] < 0) continue;
      proto::PullRequest pull;
      for (const std::string& name : names_[bucket][s]) pull.add_names(name);
      pull.set_min_version(headers_[s].pull_min_version());
      pull.set_worker(headers_[s].id().worker());
      pull.set_worker_clock(headers_[s].worker_clock());
      pull.set_wire_dtype(headers_[s].pull_wire_dtype());
      pull.set_skip_frozen(headers_[s].pull_skip_frozen());
      pusher_->SendPull(s, std::move(pull));
    }
  }
  ++buckets_sent_;
  return absl::OkStatus();
}

absl::Status OverlappedPush::Finish(std::vector<proto::PushResponse>* replies) {
  const absl::Time start = clock_->Now();
  absl::Status waited = pusher_->Wait(replies);
  const bool pulls = !headers_.empty() && headers_[0].pull_after();
  if (waited.ok() && buckets_sent_ != num_buckets()) {
    waited = absl::InternalError(absl::StrCat("the backward pass handed over ", buckets_sent_,
                                              " of ", num_buckets(), " gradient buckets"));
  }
  if (waited.ok() && pulls) {
    // The version each shard's parameters come at, and the first layers'
    // part, which the next forward pass needs first.
    for (int s = 0; s < static_cast<int>(pulled_.size()) && waited.ok(); ++s) {
      waited = pusher_->WaitPull(s, 0, &pulled_[s][0]);
      if (waited.ok()) {
        arrived_[s][0] = true;
        pulled_version_[s] = pulled_[s][0].version();
      }
    }
  }
  exposed_ += clock_->Now() - start;
  if (!waited.ok()) {
    Abandon();
    return waited;
  }
  if (!pulls) return EndRound();
  pending_ = true;
  taken_.assign(buckets_.size(), false);
  buckets_taken_ = 0;
  return absl::OkStatus();
}

absl::Status OverlappedPush::TakeVariable(int v, std::vector<std::vector<float>>* params) {
  if (!pending_) return absl::OkStatus();
  if (v < 0 || v >= static_cast<int>(bucket_of_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no model variable ", v));
  }
  const int b = bucket_of_[v];
  if (taken_[b]) return absl::OkStatus();
  const absl::Time start = clock_->Now();
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> pieces;
  absl::Status s;
  for (int shard = 0; shard < static_cast<int>(pulled_.size()) && s.ok(); ++shard) {
    if (part_of_[b][shard] < 0) continue;
    const int n = num_parts_[shard] - 1 - part_of_[b][shard];
    if (!arrived_[shard][n]) {
      s = pusher_->WaitPull(shard, n, &pulled_[shard][n]);
      arrived_[shard][n] = s.ok();
    }
    pieces.push_back(&pulled_[shard][n].variables());
  }
  exposed_ += clock_->Now() - start;
  if (s.ok()) {
    s = sharded_->AssembleVariables(pieces, buckets_[b], params,
                                    !headers_.empty() && headers_[0].pull_skip_frozen());
  }
  if (!s.ok()) {
    Abandon();
    return s;
  }
  for (int shard = 0; shard < static_cast<int>(pulled_.size()); ++shard) {
    if (part_of_[b][shard] >= 0) {
      pulled_[shard][num_parts_[shard] - 1 - part_of_[b][shard]].Clear();
    }
  }
  taken_[b] = true;
  if (++buckets_taken_ < num_buckets()) return absl::OkStatus();
  pending_ = false;
  return EndRound();
}

absl::Status OverlappedPush::TakeAll(std::vector<std::vector<float>>* params) {
  for (const std::vector<int>& bucket : buckets_) {
    if (!pending_) break;
    PSC_RETURN_IF_ERROR(TakeVariable(bucket.front(), params));
  }
  return absl::OkStatus();
}

absl::Status OverlappedPush::EndRound() {
  absl::Duration round;
  absl::Status s = pusher_->EndRound(&round);
  comm_ += round;
  for (int shard = 0; shard < static_cast<int>(arrived_.size()); ++shard) {
    arrived_[shard].assign(arrived_[shard].size(), false);
    for (proto::PullResponse& r : pulled_[shard]) r.Clear();
  }
  return s;
}

void OverlappedPush::Abandon() {
  pusher_->Abort();
  pending_ = false;
  (void)EndRound();
  // The failed unit's times go with it, not into the next unit's.
  comm_ = absl::ZeroDuration();
  exposed_ = absl::ZeroDuration();
}

void OverlappedPush::TakeTimes(absl::Duration* comm, absl::Duration* exposed) {
  *comm = std::exchange(comm_, absl::ZeroDuration());
  *exposed = std::exchange(exposed_, absl::ZeroDuration());
}

}  // namespace worker
}  // namespace psc
