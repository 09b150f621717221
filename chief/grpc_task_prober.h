// TaskProber over gRPC: asks a ps for its stats and a worker for its status,
// with the cluster token, and checks that the answer comes from the task
// TF_CONFIG names (right role, right index).
#ifndef PSC_CHIEF_GRPC_TASK_PROBER_H_
#define PSC_CHIEF_GRPC_TASK_PROBER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chief/cluster_waiter.h"
#include "common/rpc/security.h"
#include "grpcpp/channel.h"

namespace psc {
namespace chief {

// Thread-safe. Keeps one channel per task, so gRPC's reconnects carry over
// between probes.
class GrpcTaskProber : public TaskProber {
 public:
  explicit GrpcTaskProber(rpc::SecurityOptions security) : security_(std::move(security)) {}
  absl::Status Probe(const cluster::TaskAddress& task, absl::Duration timeout) override;

 private:
  std::shared_ptr<grpc::Channel> ChannelFor(const cluster::TaskAddress& task);

  const rpc::SecurityOptions security_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_GRPC_TASK_PROBER_H_
