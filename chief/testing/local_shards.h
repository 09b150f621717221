// A ParameterClient whose every call reaches a real shard
// (ps_server::ShardServer) in this process: the chief's code against the
// servers' own checks, without a transport; and a job with tables on it.
#ifndef PSC_CHIEF_TESTING_LOCAL_SHARDS_H_
#define PSC_CHIEF_TESTING_LOCAL_SHARDS_H_

#include <memory>
#include <vector>

#include "chief/shard_control.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/compute/model.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace chief {
namespace testing {

// Ids (3,) of a table of 10 rows of 2, flattened into a Dense.
constexpr char kBagModel[] = R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
  {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
  {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2}}]}})";

class LocalShards : public ps_client::testing::FakeParameterClient {
 public:
  explicit LocalShards(int n) : FakeParameterClient(n) {
    for (int s = 0; s < n; ++s) {
      ps_server::ShardServerOptions o;
      o.task_index = s;
      o.shard.clock = &clock_;
      o.expiry_interval = absl::ZeroDuration();
      servers_.push_back(std::make_unique<ps_server::ShardServer>(o));
    }
  }
  absl::Status Configure(int s, const proto::ConfigureRequest& r) override {
    return servers_[s]->Configure(r);
  }
  absl::Status CreateVariables(int s, const proto::CreateVariablesRequest& r) override {
    proto::CreateVariablesResponse response;
    return servers_[s]->CreateVariables(r, &response);
  }
  absl::Status Pull(int s, const proto::PullRequest& r, proto::PullResponse* response,
                    absl::Duration) override {
    ++pulls_;
    return servers_[s]->PullBlocking(r, absl::InfiniteFuture(), response);
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses, absl::Duration t) override {
    responses->resize(requests.size());
    for (size_t s = 0; s < requests.size(); ++s) {
      PSC_RETURN_IF_ERROR(Pull(static_cast<int>(s), requests[s], &(*responses)[s], t));
    }
    return absl::OkStatus();
  }
  absl::Status Push(int s, const proto::PushRequest& r, proto::PushResponse* response,
                    absl::Duration) override {
    return servers_[s]->PushBlocking(r, absl::InfiniteFuture(), response);
  }
  absl::Status ExportState(int s, const proto::ExportStateRequest& r,
                           proto::ExportStateResponse* response) override {
    return servers_[s]->ExportState(r, response);
  }
  int pulls() const { return pulls_; }

 private:
  base::RealClock clock_;
  std::vector<std::unique_ptr<ps_server::ShardServer>> servers_;
  int pulls_ = 0;
};

// A job of `model` (seed 5, async, `optimizer` completed) whose tables are
// split by rows over the two shards of `servers` and declared row-sparse,
// its variables made there (ShardControl).
struct TableJob {
  proto::JobSpec job;
  std::unique_ptr<ps_client::ShardedParameters> sharded;
};
inline absl::StatusOr<std::unique_ptr<TableJob>> StartTableJob(
    const compute::Model& model, const proto::OptimizerConfig& optimizer, LocalShards* servers) {
  auto t = std::make_unique<TableJob>();
  t->job.set_seed(5);
  t->job.mutable_policy()->set_mode(proto::MODE_ASYNC);
  PSC_ASSIGN_OR_RETURN(*t->job.mutable_optimizer(), optimizer::CompleteOptimizerConfig(optimizer));
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 16;  // a table of a few rows split over both
  PSC_ASSIGN_OR_RETURN(proto::Placement placement,
                       placement::PlaceVariables(model.variables(), options));
  PSC_RETURN_IF_ERROR(
      placement::DeclareGradients(0, model.moving_averages(), &placement, model.table_variables()));
  *t->job.mutable_placement() = placement;
  PSC_ASSIGN_OR_RETURN(ps_client::ShardedParameters sharded,
                       ps_client::ShardedParameters::Create(placement, model.variables()));
  t->sharded = std::make_unique<ps_client::ShardedParameters>(std::move(sharded));
  ShardControl control(&t->job, 1, servers, t->sharded.get(), &model);
  PSC_RETURN_IF_ERROR(control.ConfigureAll());
  PSC_RETURN_IF_ERROR(control.InitializeOrRestore("").status());
  return t;
}

}  // namespace testing
}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_TESTING_LOCAL_SHARDS_H_
