// The Coordinator gRPC service the chief serves: a thin adapter
// (rpc::UnaryService: the token, parsing, exceptions) over TaskRegistry
// (registration, heartbeats, joins and leaves),
// and over the rendezvous store of multi_worker_mirrored's collective
// groups (collective::MemoryStore). A StoreGet waits at most kMaxStoreWait
// (200 ms) on the server, so no handler holds a gRPC thread for long; the client
// polls up to its own deadline (worker/grpc_store_client.h).
#ifndef PSC_CHIEF_COORDINATOR_SERVICE_H_
#define PSC_CHIEF_COORDINATOR_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "chief/task_registry.h"
#include "common/collective/memory_store.h"
#include "common/rpc/unary_service.h"

namespace psc {
namespace chief {

// Thread-safe.
class CoordinatorService final : public rpc::UnaryService {
 public:
  static constexpr absl::Duration kMaxStoreWait = absl::Milliseconds(200);

  // Not owned; `store` may be null (StoreSet/StoreGet: FAILED_PRECONDITION).
  CoordinatorService(TaskRegistry* registry, std::string token,
                     collective::MemoryStore* store = nullptr);

 private:
  TaskRegistry* const registry_;
  collective::MemoryStore* const store_;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_COORDINATOR_SERVICE_H_
