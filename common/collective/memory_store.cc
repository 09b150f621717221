#include "common/collective/memory_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psc {
namespace collective {

absl::Status MemoryStore::Set(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store key of ", key.size(), " bytes (1 to ", kMaxKeyBytes, ")"));
  }
  absl::MutexLock lock(&mu_);
  auto it = values_.find(key);
  if (it != values_.end()) {
    if (it->second == value) return absl::OkStatus();  // a retried Set
    return absl::AlreadyExistsError(absl::StrCat("store key \"", key, "\" is already set"));
  }
  if (values_.size() >= kMaxKeys || value.size() > kMaxBytes - bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store is full (", values_.size(), " keys, ", bytes_, " bytes)"));
  }
  bytes_ += value.size();
  values_.emplace(key, value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> MemoryStore::Get(const std::string& key, absl::Duration wait) {
  wait = std::clamp(wait, absl::ZeroDuration(), kMaxWait);
  absl::MutexLock lock(&mu_);
  struct Args {
    const std::map<std::string, std::string>* values;
    const std::string* key;
  } args{&values_, &key};
  const bool found =
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Args* a) { return a->values->count(*a->key) > 0; }, &args),
                           wait);
  if (!found) {
    return absl::DeadlineExceededError(
        absl::StrCat("store key \"", key, "\" was not set within ", absl::FormatDuration(wait)));
  }
  return values_.at(key);
}

size_t MemoryStore::ErasePrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    bytes_ -= it->second.size();
    it = values_.erase(it);
    ++n;
  }
  return n;
}

size_t MemoryStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

}  // namespace collective
}  // namespace psc
