// The Coordinator gRPC service the chief serves: a thin adapter
// (rpc::UnaryService: the token, parsing, exceptions) over TaskRegistry.
#ifndef PSC_CHIEF_COORDINATOR_SERVICE_H_
#define PSC_CHIEF_COORDINATOR_SERVICE_H_

#include <string>

#include "chief/task_registry.h"
#include "common/rpc/unary_service.h"

namespace psc {
namespace chief {

// Thread-safe.
class CoordinatorService final : public rpc::UnaryService {
 public:
  // `registry` is not owned.
  CoordinatorService(TaskRegistry* registry, std::string token);

 private:
  TaskRegistry* const registry_;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_COORDINATOR_SERVICE_H_
