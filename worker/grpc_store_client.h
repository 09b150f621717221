// The rendezvous store of multi_worker_mirrored (collective::KeyValueStore)
// over the coordinator's StoreSet/StoreGet RPCs, with the cluster token. A
// Get polls: each StoreGet waits at most the server's cap (200 ms),
// and the client asks again until its own deadline.
#ifndef PSC_WORKER_GRPC_STORE_CLIENT_H_
#define PSC_WORKER_GRPC_STORE_CLIENT_H_

#include <memory>
#include <string>

#include "common/collective/collective.h"
#include "common/rpc/security.h"
#include "proto/coordinator.grpc.pb.h"

namespace psc {
namespace worker {

// Thread-safe.
class GrpcStoreClient : public collective::KeyValueStore {
 public:
  GrpcStoreClient(const std::string& coordinator_address, const rpc::SecurityOptions& security);
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override;

 private:
  const rpc::SecurityOptions security_;
  const std::string address_;
  const std::unique_ptr<proto::Coordinator::Stub> stub_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_GRPC_STORE_CLIENT_H_
