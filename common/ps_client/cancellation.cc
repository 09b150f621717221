#include "common/ps_client/cancellation.h"

#include <algorithm>

namespace psc {
namespace ps_client {

bool Cancellation::Add(const void* key, std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  hooks_.emplace_back(key, std::move(hook));
  return true;
}

void Cancellation::Remove(const void* key) {
  absl::MutexLock lock(&mu_);
  auto it =
      std::find_if(hooks_.begin(), hooks_.end(), [key](const auto& h) { return h.first == key; });
  if (it != hooks_.end()) hooks_.erase(it);
}

void Cancellation::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [key, hook] : hooks_) hook();
}

void Cancellation::Interrupt() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, hook] : hooks_) hook();
}

bool Cancellation::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

CancelScope::CancelScope(const Attempt& attempt, std::function<void()> hook) : attempt_(attempt) {
  for (int i = 0; i < 2 && ok_; ++i) {
    if (attempt_.scopes[i] == nullptr) continue;
    added_[i] = attempt_.scopes[i]->Add(this, hook);
    ok_ = added_[i];
  }
  if (ok_) return;
  // The call will not start: it is registered nowhere.
  for (int i = 0; i < 2; ++i) {
    if (added_[i]) attempt_.scopes[i]->Remove(this);
    added_[i] = false;
  }
}

CancelScope::~CancelScope() {
  for (int i = 0; i < 2; ++i) {
    if (added_[i]) attempt_.scopes[i]->Remove(this);
  }
}

}  // namespace ps_client
}  // namespace psc
