// Pushes in parts (worker --overlap; DESIGN.md, "Pushes in parts"): a worker
// sends each bucket of its gradients to a shard as soon as the backward pass
// has made it, as part p of n of one push id (PushId.part, num_parts). The
// shard holds the parts here until all n have arrived; they then form the one
// push the rest of the shard knows (the exactly-once ledger, the sync
// accumulator, the optimizer), so a step in parts trains bit for bit as a
// step in one push does.
//
// Per (worker, replica slot) there is at most one push being assembled:
//   a part of the same push (unit, step, computed_on_version, num_parts) is
//   added, or acknowledged as a duplicate when that part is already held
//   (a retry);
//   a part of a later step replaces it (its parts are abandoned: a worker
//   sends step t + 1 only once step t was answered, so the older push can
//   never be completed by this worker; a backup that fell behind moved on);
//   a part of an earlier step is stale (a retry of a push that was replaced).
// Once the ledger has recorded the whole push, a part of it is the ledger's
// duplicate (the Shard asks the ledger first): every part is deduplicated.
//
// Memory: at most one push's tensors per (worker, slot), each part checked
// against the request limit; the Shard checks names and shapes before Add.
//
// Thread-compatible: the Shard calls it under its metadata lock.
#ifndef PSC_PS_SERVER_PUSH_PARTS_H_
#define PSC_PS_SERVER_PUSH_PARTS_H_

#include <cstdint>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

// The most parts one push may come in.
inline constexpr int32_t kMaxPushParts = 4096;

// Whether `id` names a part of a push in parts (num_parts > 1).
inline bool IsPushPart(const proto::PushId& id) { return id.num_parts() > 1; }

// INVALID_ARGUMENT unless the id's part fields are those of a whole push
// (part 0, num_parts 0 or 1) or of a part (0 <= part < num_parts <=
// kMaxPushParts).
absl::Status CheckPushParts(const proto::PushId& id);

class PushAssembler {
 public:
  enum class Verdict {
    kHeld,       // held until the push's other parts arrive
    kDuplicate,  // this part is held already
    kStale,      // of an older step than the push being assembled
    kComplete,   // the push is whole: *whole holds it
  };

  // Adds `part` (CheckPushParts passed; names and shapes checked). On
  // kComplete *whole is the push: the id without its part fields, every
  // part's gradients in part order, the computed_on_version, and the
  // worker_clock and pull fields of the part that completed it.
  // INVALID_ARGUMENT, with nothing changed, for a variable that an earlier
  // part of the push carried already.
  absl::StatusOr<Verdict> Add(const proto::PushRequest& part, proto::PushRequest* whole);

  // Drops every push being assembled; returns how many parts they held.
  int64_t Clear();

  // Parts dropped by replacement since the last call (the Shard's counter).
  int64_t TakeAbandoned() { return std::exchange(abandoned_, 0); }

  // Pushes being assembled, and the parts they hold.
  int64_t pushes() const { return static_cast<int64_t>(pending_.size()); }
  int64_t parts() const;

 private:
  struct Pending {
    proto::PushId id;  // of the part that began it
    int64_t computed_on_version = 0;
    absl::btree_map<int32_t, proto::PushRequest> parts;  // by part index
    absl::flat_hash_set<std::string> names;              // every part's variables
  };
  using Key = std::pair<int32_t, int32_t>;  // worker, replica slot

  absl::btree_map<Key, Pending> pending_;
  int64_t abandoned_ = 0;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_PUSH_PARTS_H_
