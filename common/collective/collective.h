// The collectives of the multi_worker_mirrored strategy (DESIGN.md,
// "Strategies"), without naming a library: GlooCollective on the CPU
// (gloo_collective.h, TCP between the workers), NcclCollective between GPU
// workers (nccl_collective.h). A group is formed once per membership
// (a "generation"), through a KeyValueStore that the chief serves.
//
// Every member must call the same operations in the same order. Results are
// bit-identical on every member (each element is reduced once, by one rank,
// then copied), so replicas that apply the same reduced gradient stay
// bit-identical. An operation that cannot complete (a peer died, the
// timeout passed) fails with UNAVAILABLE or DEADLINE_EXCEEDED; after a
// failure the group is unusable and must be formed again.
#ifndef PSC_COMMON_COLLECTIVE_COLLECTIVE_H_
#define PSC_COMMON_COLLECTIVE_COLLECTIVE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace psc {
namespace collective {

// Thread-compatible: one operation at a time, from any one thread.
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `data` element-wise over the group, in place (host memory).
  virtual absl::Status AllReduceSum(absl::Span<float> data) = 0;
  // Rank `root`'s `data` to every member, in place.
  virtual absl::Status Broadcast(absl::Span<float> data, int root) = 0;
  // What the group runs on, for logs: "gloo/tcp ring", "nccl".
  virtual std::string Describe() const = 0;
};

// The rendezvous store: the chief's Coordinator service over gRPC in the
// daemons (StoreSet/StoreGet), an in-memory map in the tests. Thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // ALREADY_EXISTS if `key` holds another value (a key is written once).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `wait` for it to be set
  // (DEADLINE_EXCEEDED naming the key).
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) = 0;
};

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_COLLECTIVE_H_
