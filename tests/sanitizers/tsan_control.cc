// The control of the TSan stage (run_tsan.sh): proof that TSan, with
// absl_mutex_tsan.cc, sees absl::Mutex, absl::CondVar and
// absl::Notification (no report for "locked") and still finds a real race
// ("race").
//
// The race must be found whatever the timing and whatever the optimizer
// does, so the "race" mode has no synchronization at all between thread
// start and join: the two writes go through a function the compiler may
// not inline or move, and nothing can order them. (An earlier version wrote
// the racy int just before the mutex loops; the compiler may sink such a
// store into the next critical section, and on a 2-core CI machine whose
// thread ran first the unlock-lock edge then ordered the two writes: no
// report, and the stage failed.)
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

__attribute__((noinline)) void Store(int* p, int v) {
  *p = v;
  asm volatile("" ::: "memory");
}

int Race() {
  int shared = 0;
  std::thread t([&] { Store(&shared, 1); });
  Store(&shared, 2);
  t.join();
  std::printf("tsan_control: race ran, shared %d\n", shared);
  return 0;
}

int Locked() {
  absl::Mutex mu;
  absl::CondVar cv;
  int counter = 0;
  bool ready = false;
  absl::Notification done;
  int handed_over = 0;
  int shared = 0;
  std::thread t([&] {
    {
      absl::MutexLock lock(&mu);
      Store(&shared, 1);
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
  {
    absl::MutexLock lock(&mu);
    Store(&shared, 2);
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

}  // namespace

int main(int argc, char** argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  return race ? Race() : Locked();
}
