// What the fuzz targets of the parameter server share: a small configured
// shard (two variables, SGD) to drive with hostile requests, and the
// accounting invariant every request must leave true.
#ifndef PSC_TESTS_FUZZ_FUZZ_SHARD_H_
#define PSC_TESTS_FUZZ_FUZZ_SHARD_H_

#include <cstdio>
#include <cstdlib>

#include "common/base/clock.h"
#include "common/optimizer/optimizer.h"
#include "common/tensor/tensor.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace fuzz {

// A ShardServer in `mode` with "a" [2,3] and "b" [4], 2 workers, taking
// top-k sparse gradients when `topk_ratio` > 0 (at 0.5: 3 of a's values, 2
// of b's).
//
// `expiry_interval` is the server's timer (ShardServerOptions). Zero runs
// none, and then a pull that waits never ends (nothing calls ExpireWaiters):
// only for a caller whose pulls cannot wait (deadline now). A target whose
// pulls may wait runs the timer, as the daemon does.
inline std::unique_ptr<ps_server::ShardServer> SmallShard(
    proto::TrainingMode mode, absl::Duration expiry_interval = absl::ZeroDuration(),
    double topk_ratio = 0) {
  static base::RealClock clock;
  ps_server::ShardServerOptions options;
  options.shard.clock = &clock;
  options.expiry_interval = expiry_interval;
  auto server = std::make_unique<ps_server::ShardServer>(options);
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(2);
  c.mutable_policy()->set_mode(mode);
  c.mutable_policy()->set_staleness(1);
  c.mutable_policy()->set_topk_ratio(topk_ratio);
  for (const char* name : {"a", "b"}) {  // the variables below, both trainable
    if (topk_ratio <= 0) break;
    proto::GradientDeclaration* d = c.add_gradients();
    d->set_variable(name);
    d->set_encoding(proto::GRADIENT_TOP_K);
  }
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  c.mutable_optimizer()->set_learning_rate(0.1);
  if (!server->Configure(c).ok()) std::abort();
  proto::CreateVariablesRequest create;
  auto* a = create.add_variables();
  a->set_name("a");
  tensor::SetFloatTensor({2, 3}, std::vector<float>(6, 0.5f), a->mutable_tensor());
  auto* b = create.add_variables();
  b->set_name("b");
  tensor::SetFloatTensor({4}, std::vector<float>(4, -1.0f), b->mutable_tensor());
  proto::CreateVariablesResponse r;
  if (!server->CreateVariables(create, &r).ok()) std::abort();
  return server;
}

// pushes_accepted = applied + dropped_stale + discarded + pending, always.
inline void CheckAccounting(const ps_server::ShardServer& server) {
  const proto::ShardStats s = server.Stats();
  if (s.pushes_accepted() != s.gradients_applied() + s.gradients_dropped_stale() +
                                 s.gradients_discarded() + s.gradients_pending()) {
    std::fprintf(stderr, "accounting broken: %s\n", s.ShortDebugString().c_str());
    std::abort();
  }
}

}  // namespace fuzz
}  // namespace psc

#endif  // PSC_TESTS_FUZZ_FUZZ_SHARD_H_
