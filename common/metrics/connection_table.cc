#include "common/metrics/connection_table.h"

#include <algorithm>

namespace psc {
namespace metrics {

bool ConnectionTable::Admit() {
  absl::MutexLock lock(&mu_);
  if (admitted_ + static_cast<int>(started_.size()) >= limit_) {
    ++refused_;
    return false;
  }
  ++admitted_;
  return true;
}

void ConnectionTable::Abandon() {
  absl::MutexLock lock(&mu_);
  if (admitted_ > 0) --admitted_;
}

void ConnectionTable::Started(int fd, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (admitted_ > 0) --admitted_;
  started_[fd] = Entry{now + head_timeout_, false};
}

void ConnectionTable::RequestBegan(int fd) {
  absl::MutexLock lock(&mu_);
  auto it = started_.find(fd);
  if (it != started_.end()) it->second.due = absl::InfiniteFuture();
}

void ConnectionTable::RequestEnded(int fd, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = started_.find(fd);
  if (it != started_.end() && !it->second.closing) it->second.due = now + head_timeout_;
}

void ConnectionTable::Closed(int fd) {
  absl::MutexLock lock(&mu_);
  started_.erase(fd);
}

void ConnectionTable::ForEachOverdue(absl::Time now, absl::FunctionRef<void(int fd)> close) {
  absl::MutexLock lock(&mu_);
  for (auto& [fd, entry] : started_) {
    if (entry.closing || entry.due > now) continue;
    entry.closing = true;
    ++overdue_;
    close(fd);
  }
}

absl::Time ConnectionTable::NextDeadline() const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [fd, entry] : started_) {
    if (!entry.closing) next = std::min(next, entry.due);
  }
  return next;
}

int ConnectionTable::open() const {
  absl::MutexLock lock(&mu_);
  return admitted_ + static_cast<int>(started_.size());
}

int64_t ConnectionTable::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

int64_t ConnectionTable::overdue() const {
  absl::MutexLock lock(&mu_);
  return overdue_;
}

}  // namespace metrics
}  // namespace psc
