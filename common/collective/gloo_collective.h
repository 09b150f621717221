// The CPU collectives of multi_worker_mirrored: Gloo (Debian's libgloo-dev)
// over its TCP transport, with Gloo's ring all-reduce. The group is formed
// through a KeyValueStore (the chief's Coordinator service), under a prefix
// that names the group's generation, so an old generation's keys never
// mix with a new one's.
#ifndef PSC_COMMON_COLLECTIVE_GLOO_COLLECTIVE_H_
#define PSC_COMMON_COLLECTIVE_GLOO_COLLECTIVE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/collective.h"

namespace psc {
namespace collective {

struct GlooOptions {
  // The address this rank listens on for its peers (its TF_CONFIG host);
  // Gloo picks the port.
  std::string hostname = "127.0.0.1";
  // Forming the group, and each operation, fails after this long.
  absl::Duration timeout = absl::Seconds(60);
  // Set (by the chief) when the group is abandoned: a rank still waiting
  // for its peers' addresses gives up (ABORTED). Empty: none.
  std::string abort_key;
  // Polled while waiting for the peers: true gives up (CANCELLED). May be
  // empty.
  std::function<bool()> cancelled;
};

// Joins the group of `size` ranks as `rank`: publishes its address under
// `prefix` in `store` and connects to every peer (a full mesh). Each call
// of every rank must use the same prefix, size and a distinct rank.
// INVALID_ARGUMENT for a bad rank or size; UNAVAILABLE or DEADLINE_EXCEEDED
// when the peers do not all arrive within options.timeout.
absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(KeyValueStore* store,
                                                                 const std::string& prefix,
                                                                 int rank, int size,
                                                                 const GlooOptions& options);

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_GLOO_COLLECTIVE_H_
