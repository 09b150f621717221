// The control of the TSan stage (run_tsan.sh): proof that TSan, with
// absl_mutex_tsan.cc, sees absl::Mutex, absl::CondVar and
// absl::Notification (no report for "locked") and still finds a real race
// ("race": both threads write one int without the mutex; nothing orders
// the two writes, whatever the timing).
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

int main(int argc, char** argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  absl::Mutex mu;
  absl::CondVar cv;
  int counter = 0;
  bool ready = false;
  absl::Notification done;
  int handed_over = 0;
  int shared = 0;
  std::thread t([&] {
    if (race) {
      shared = 1;  // unguarded
    } else {
      absl::MutexLock lock(&mu);
      shared = 1;
    }
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++counter;
    }
    {
      absl::MutexLock lock(&mu);
      ready = true;
      cv.Signal();
    }
    handed_over = 42;  // published by the notification
    done.Notify();
  });
  if (race) {
    shared = 2;  // unguarded: nothing orders it with the thread's write
  } else {
    absl::MutexLock lock(&mu);
    shared = 2;
  }
  for (int i = 0; i < 1000; ++i) {
    absl::MutexLock lock(&mu);
    ++counter;
  }
  {
    absl::MutexLock lock(&mu);
    while (!ready) cv.Wait(&mu);
    mu.Await(absl::Condition(
        +[](bool* r) { return *r; }, &ready));
  }
  done.WaitForNotification();
  t.join();
  std::printf("tsan_control: counter %d, handed over %d, shared %d\n", counter, handed_over,
              shared);
  return 0;
}
