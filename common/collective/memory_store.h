// An in-memory KeyValueStore: what the chief's Coordinator service serves
// (StoreSet/StoreGet), and the store of the tests that form groups in one
// process. Keys are written once; Get waits for a key with a deadline.
#ifndef PSC_COMMON_COLLECTIVE_MEMORY_STORE_H_
#define PSC_COMMON_COLLECTIVE_MEMORY_STORE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/collective/collective.h"

namespace psc {
namespace collective {

// Thread-safe.
class MemoryStore : public KeyValueStore {
 public:
  // At most this many keys and bytes in all (RESOURCE_EXHAUSTED beyond):
  // a group of N ranks writes a few keys per rank and generation.
  static constexpr size_t kMaxKeys = 1 << 16;
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  static constexpr size_t kMaxKeyBytes = 1024;
  // The longest wait a Get may ask for; longer ones are capped.
  static constexpr absl::Duration kMaxWait = absl::Minutes(10);

  absl::Status Set(const std::string& key, const std::string& value) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes every key that starts with `prefix` (a generation no longer
  // used); returns how many.
  size_t ErasePrefix(const std::string& prefix) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_MEMORY_STORE_H_
