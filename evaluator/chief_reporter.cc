#include "evaluator/chief_reporter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/backoff.h"
#include "common/base/clock.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace evaluator {

ChiefReporter::ChiefReporter(const std::string& chief_address, const rpc::SecurityOptions& security,
                             int task_index)
    : security_(security),
      address_(chief_address),
      task_index_(task_index),
      stub_(proto::Coordinator::NewStub(rpc::CreateChannel(chief_address, security))) {}

absl::Status ChiefReporter::Report(int64_t step, const job::SplitMetrics& metrics,
                                   absl::Duration patience) {
  proto::ReportEvaluationRequest request;
  request.mutable_task()->set_type("evaluator");
  request.mutable_task()->set_index(task_index_);
  request.set_step(step);
  request.set_loss(metrics.loss);
  request.set_accuracy(metrics.accuracy);
  base::RealClock clock;
  const absl::Time give_up = clock.Now() + patience;
  base::Backoff backoff({absl::Milliseconds(200), 2.0, absl::Seconds(2), 0.2}, task_index_ + 1);
  for (;;) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security_, absl::Seconds(5));
    proto::ReportEvaluationResponse response;
    absl::Status s = rpc::FromGrpcStatus(stub_->ReportEvaluation(&context, request, &response),
                                         absl::StrCat("chief (", address_, ") ReportEvaluation"));
    if (s.ok() || (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s))) return s;
    if (clock.Now() >= give_up) return s;
    clock.SleepFor(std::min(backoff.Next(), give_up - clock.Now()));
  }
}

}  // namespace evaluator
}  // namespace psc
