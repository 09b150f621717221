// The Worker gRPC service: a thin adapter (rpc::UnaryService: the token,
// parsing, exceptions) over the WorkerCore. RunUnit holds no gRPC thread: it
// is finished from the unit's thread.
#ifndef PSC_WORKER_WORKER_SERVICE_H_
#define PSC_WORKER_WORKER_SERVICE_H_

#include <string>

#include "common/base/shutdown.h"
#include "common/rpc/unary_service.h"
#include "worker/worker_core.h"

namespace psc {
namespace worker {

// Thread-safe.
class WorkerService final : public rpc::UnaryService {
 public:
  // `core` and `shutdown` are not owned and must outlive the service.
  WorkerService(WorkerCore* core, std::string token, base::ShutdownSignal* shutdown);

 private:
  WorkerCore* const core_;
  base::ShutdownSignal* const shutdown_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_SERVICE_H_
