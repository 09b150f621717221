// The metrics endpoint's open connections and the two rules that keep slow
// or idle clients from stopping a scrape (exporter.h), transport-free:
//
//   limit          at most `limit` connections are open; one more is refused
//                  at once (Admit is false: the caller closes it unserved)
//   head deadline  a connection's request head must arrive within
//                  `head_timeout` of its opening, or of the end of its
//                  previous request (keep-alive); one that misses it is
//                  overdue and closed, however it trickles its bytes
//
// A connection is keyed by its socket descriptor from Started until Closed;
// the HTTP server calls Closed before it closes the descriptor, so a key is
// never reused while it is in the table, and ForEachOverdue's callback runs
// under the table's lock, so it never sees a descriptor that is already
// closed. Thread-safe.
#ifndef PSC_COMMON_METRICS_CONNECTION_TABLE_H_
#define PSC_COMMON_METRICS_CONNECTION_TABLE_H_

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace psc {
namespace metrics {

class ConnectionTable {
 public:
  ConnectionTable(int limit, absl::Duration head_timeout)
      : limit_(limit), head_timeout_(head_timeout) {}

  // A connection just accepted: true and counted if fewer than `limit` are
  // open (admitted or started), false if it must be closed at once.
  bool Admit() ABSL_LOCKS_EXCLUDED(mu_);
  // An admitted connection the server never started (it failed to take it).
  void Abandon() ABSL_LOCKS_EXCLUDED(mu_);

  // The server started serving admitted connection `fd`: its head is due by
  // now + head_timeout.
  void Started(int fd, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // `fd`'s request head arrived: no deadline while its request is answered.
  void RequestBegan(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  // `fd`'s request was answered: the next head is due by now + head_timeout.
  void RequestEnded(int fd, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // `fd` is about to be closed; it no longer counts. Unknown keys are ignored.
  void Closed(int fd) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls close(fd) under the lock for each connection whose head is overdue
  // at `now`, once per connection (it stays counted until Closed).
  void ForEachOverdue(absl::Time now, absl::FunctionRef<void(int fd)> close)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The earliest head deadline not yet passed to ForEachOverdue, or
  // InfiniteFuture.
  absl::Time NextDeadline() const ABSL_LOCKS_EXCLUDED(mu_);

  int open() const ABSL_LOCKS_EXCLUDED(mu_);         // admitted or started, not closed
  int64_t refused() const ABSL_LOCKS_EXCLUDED(mu_);  // Admit answered false
  int64_t overdue() const ABSL_LOCKS_EXCLUDED(mu_);  // closed by ForEachOverdue

 private:
  struct Entry {
    absl::Time due = absl::InfiniteFuture();  // InfiniteFuture while a request is answered
    bool closing = false;                     // ForEachOverdue has closed it
  };

  const int limit_;
  const absl::Duration head_timeout_;
  mutable absl::Mutex mu_;
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;  // admitted, not yet started
  absl::flat_hash_map<int, Entry> started_ ABSL_GUARDED_BY(mu_);
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t overdue_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_CONNECTION_TABLE_H_
