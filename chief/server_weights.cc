#include "chief/server_weights.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chief/table_rows.h"
#include "common/base/status_macros.h"
#include "common/optimizer/optimizer.h"
#include "proto/checkpoint.pb.h"

namespace psc {
namespace chief {

absl::StatusOr<std::unique_ptr<ServerWeights>> ServerWeights::Create(
    const proto::JobSpec* job, const compute::Model* model, ps_client::ParameterClient* servers,
    const ps_client::ShardedParameters* sharded, bool with_optimizer, double learning_rate,
    absl::Duration timeout) {
  std::unique_ptr<ServerWeights> w(new ServerWeights());
  w->job_ = job;
  w->model_ = model;
  w->servers_ = servers;
  w->sharded_ = sharded;
  w->timeout_ = timeout;
  const size_t n = model->variables().size();
  if (job->placement().variables_size() != static_cast<int>(n)) {
    return absl::InvalidArgumentError(absl::StrCat("the placement places ",
                                                   job->placement().variables_size(),
                                                   " variables; the model has ", n));
  }
  // What the servers leave out of a pull or a state with skip_row_sparse.
  w->by_rows_.assign(n, false);
  for (size_t v = 0; v < n; ++v) {
    const bool moving_average =
        v < model->moving_averages().size() && model->moving_averages()[v].has_value();
    w->by_rows_[v] =
        !moving_average &&
        job->placement().variables(static_cast<int>(v)).gradient() == proto::GRADIENT_ROW_SPARSE;
    if (!w->by_rows_[v]) w->whole_.push_back(static_cast<int>(v));
  }
  std::vector<proto::PullRequest> requests(servers->num_shards());
  for (auto& r : requests) r.set_skip_row_sparse(true);
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(servers->PullAll(requests, &responses, timeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  for (const auto& r : responses) parts.push_back(&r.variables());
  w->values_.resize(n);
  for (int v : w->whole_) w->values_[v].resize(compute::ShapeSize(model->variables()[v].shape));
  PSC_RETURN_IF_ERROR(sharded->AssembleVariables(parts, w->whole_, &w->values_));
  w->slots_.resize(n);
  if (with_optimizer) PSC_RETURN_IF_ERROR(w->TakeOptimizerState(learning_rate));
  return w;
}

absl::Status ServerWeights::TakeOptimizerState(double learning_rate) {
  state_.learning_rate = static_cast<float>(learning_rate);
  state_.learning_rate_variable =
      job_->optimizer().schedule().kind() == proto::LearningRateSchedule::CONSTANT;
  const optimizer::Optimizer opt(job_->optimizer());
  const int num_slots = static_cast<int>(opt.slot_names().size());
  std::vector<proto::ShardCheckpoint> shards(servers_->num_shards());
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::ExportStateRequest request;
    request.set_step(0);
    *request.mutable_placement() = job_->placement();
    request.set_skip_row_sparse(true);
    proto::ExportStateResponse response;
    PSC_RETURN_IF_ERROR(servers_->ExportState(s, request, &response));
    if (!shards[s].ParseFromString(response.state())) {
      return absl::DataLossError(absl::StrCat("ps:", s, ": an undecodable ExportState"));
    }
    if (s == 0) state_.iterations = shards[s].updates();
    for (const auto& v : shards[s].variables()) {
      if (v.has_moving_average_momentum()) continue;  // kept all zero; not Keras's
      if (v.slots_size() != num_slots) {
        return absl::DataLossError(absl::StrCat("ps:", s, ": variable ", v.name(), " holds ",
                                                v.slots_size(), " slots; the optimizer keeps ",
                                                num_slots));
      }
    }
  }
  if (num_slots == 0) return absl::OkStatus();  // plain SGD: the iteration count and the rate
  // Slot k of every variable held here, assembled as the variables are (a
  // moving average stands in with its value: it is no optimizer variable).
  std::vector<std::vector<std::vector<float>>> slot(static_cast<size_t>(num_slots));
  for (int k = 0; k < num_slots; ++k) {
    std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> per_shard(shards.size());
    for (size_t s = 0; s < shards.size(); ++s) {
      for (const auto& v : shards[s].variables()) {
        proto::NamedTensor* t = per_shard[s].Add();
        t->set_name(v.name());
        *t->mutable_tensor() = v.has_moving_average_momentum() ? v.value() : v.slots(k);
      }
    }
    std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
    for (const auto& p : per_shard) parts.push_back(&p);
    slot[k].resize(model_->variables().size());
    for (int v : whole_) slot[k][v].resize(compute::ShapeSize(model_->variables()[v].shape));
    PSC_RETURN_IF_ERROR(sharded_->AssembleVariables(parts, whole_, &slot[k]));
  }
  for (int v : whole_) {
    for (int k = 0; k < num_slots; ++k) slots_[v].push_back(std::move(slot[k][v]));
  }
  // Keras's order: per trainable variable, each of its slots (Adam:
  // momentum, velocity; SGD: momentum), or slot by slot (RMSprop: every
  // velocity, then every momentum; Optimizer::keras_slots_per_variable).
  const size_t num_variables = model_->variables().size();
  auto trainable = [&](size_t v) {
    return !(v < model_->moving_averages().size() && model_->moving_averages()[v].has_value());
  };
  const bool per_variable = opt.keras_slots_per_variable();
  const size_t outer = per_variable ? num_variables : static_cast<size_t>(num_slots);
  const size_t inner = per_variable ? static_cast<size_t>(num_slots) : num_variables;
  for (size_t i = 0; i < outer; ++i) {
    for (size_t j = 0; j < inner; ++j) {
      const size_t v = per_variable ? i : j, k = per_variable ? j : i;
      if (!trainable(v)) continue;
      state_.slots.push_back({static_cast<int>(v), static_cast<int>(k)});
    }
  }
  return absl::OkStatus();
}

absl::Status ServerWeights::Variable(int v, int64_t first, int64_t count, float* out) {
  if (v < 0 || static_cast<size_t>(v) >= by_rows_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no variable ", v));
  }
  if (by_rows_[v]) {
    return ReadTableRows(servers_, job_->placement().variables(v), 0, first, count, timeout_, out);
  }
  keras::WholeWeights whole(model_, &values_);
  return whole.Variable(v, first, count, out);
}

absl::Status ServerWeights::Slot(int v, int slot, int64_t first, int64_t count, float* out) {
  if (v < 0 || static_cast<size_t>(v) >= by_rows_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no variable ", v));
  }
  if (by_rows_[v]) {
    return ReadTableRows(servers_, job_->placement().variables(v), slot + 1, first, count, timeout_,
                         out);
  }
  keras::WholeWeights whole(model_, &values_, &slots_);
  return whole.Slot(v, slot, first, count, out);
}

}  // namespace chief
}  // namespace psc
