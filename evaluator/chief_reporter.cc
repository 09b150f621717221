#include "evaluator/chief_reporter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/backoff.h"
#include "common/base/clock.h"
#include "common/base/incarnation.h"
#include "common/base/logging.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace evaluator {

ChiefReporter::ChiefReporter(const std::string& chief_address, const rpc::SecurityOptions& security,
                             int task_index)
    : security_(security), address_(chief_address), task_index_(task_index) {}

// A channel per attempt: one made while the chief's name did not resolve
// yet (docker-compose starts the chief's container last) waits out gRPC's
// re-resolution backoff, tens of seconds, after the chief is up.
std::unique_ptr<proto::Coordinator::Stub> ChiefReporter::NewStub() const {
  return proto::Coordinator::NewStub(rpc::CreateChannel(address_, security_));
}

absl::Status ChiefReporter::Call(const char* method, const Attempt& attempt,
                                 absl::Duration attempt_deadline,
                                 const base::BackoffOptions& spacing, absl::Duration patience,
                                 const std::function<bool()>& stop) const {
  base::RealClock clock;
  const absl::Time give_up = clock.Now() + patience;
  base::Backoff backoff(spacing, task_index_ + 1);
  for (;;) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security_, attempt_deadline);
    absl::Status s = rpc::FromGrpcStatus(attempt(NewStub().get(), &context),
                                         absl::StrCat("chief (", address_, ") ", method));
    if (s.ok() || (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s))) return s;
    if (stop() || clock.Now() >= give_up) return s;
    // Slices of 200 ms at most, so that `stop` is seen soon.
    for (absl::Time wake = clock.Now() + backoff.Next(); clock.Now() < wake;) {
      clock.SleepFor(
          std::min({absl::Milliseconds(200), wake - clock.Now(), give_up - clock.Now()}));
      if (stop() || clock.Now() >= give_up) return s;
    }
  }
}

absl::Status ChiefReporter::Announce(uint64_t incarnation, absl::Duration patience,
                                     const std::function<bool()>& stop) const {
  proto::RegisterRequest request;
  request.mutable_task()->set_type("evaluator");
  request.mutable_task()->set_index(task_index_);
  request.set_incarnation(incarnation);
  proto::RegisterResponse response;
  // Soon after the chief serves, so that a short job waits too: attempts of
  // 1 s at most, about 0.5 s apart at most.
  return Call(
      "Register",
      [&](proto::Coordinator::Stub* stub, grpc::ClientContext* context) {
        return stub->Register(context, request, &response);
      },
      absl::Seconds(1), {absl::Milliseconds(100), 2.0, absl::Milliseconds(500), 0.2}, patience,
      stop);
}

absl::Status ChiefReporter::Report(int64_t step, const job::SplitMetrics& metrics,
                                   absl::Duration patience) {
  proto::ReportEvaluationRequest request;
  request.mutable_task()->set_type("evaluator");
  request.mutable_task()->set_index(task_index_);
  request.set_step(step);
  request.set_loss(metrics.loss);
  request.set_accuracy(metrics.accuracy);
  proto::ReportEvaluationResponse response;
  return Call(
      "ReportEvaluation",
      [&](proto::Coordinator::Stub* stub, grpc::ClientContext* context) {
        return stub->ReportEvaluation(context, request, &response);
      },
      absl::Seconds(5), {absl::Milliseconds(200), 2.0, absl::Seconds(2), 0.2}, patience,
      [] { return false; });
}

ChiefAnnouncer::ChiefAnnouncer(const ChiefReporter* reporter, const char* program)
    : thread_([this, reporter, program] {
        absl::Status s = reporter->Announce(base::NewIncarnation(), absl::Minutes(10),
                                            [this] { return stop_.load(); });
        if (s.ok()) {
          base::Logf("%s: announced to the chief", program);
        } else if (!stop_.load()) {
          base::Logf("%s: could not announce itself to the chief: %s", program,
                     std::string(s.message()));
        }
      }) {}

ChiefAnnouncer::~ChiefAnnouncer() {
  stop_.store(true);
  thread_.join();
}

}  // namespace evaluator
}  // namespace psc
