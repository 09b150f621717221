#include "common/rpc/call_group.h"

namespace psc {
namespace rpc {

bool CallGroup::Add(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (!first_error_.ok()) return false;
  contexts_.insert(context);
  return true;
}

bool CallGroup::Add(data_channel::DataConnection* connection) {
  absl::MutexLock lock(&mu_);
  if (!first_error_.ok()) return false;
  connections_.insert(connection);
  return true;
}

void CallGroup::Remove(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  contexts_.erase(context);
}

void CallGroup::Remove(data_channel::DataConnection* connection) {
  absl::MutexLock lock(&mu_);
  connections_.erase(connection);
}

void CallGroup::Fail(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  if (!first_error_.ok()) return;
  first_error_ = error.ok() ? absl::UnknownError("call group failed") : error;
  for (grpc::ClientContext* c : contexts_) c->TryCancel();
  for (data_channel::DataConnection* c : connections_) c->Abort();
}

bool CallGroup::failed() const {
  absl::MutexLock lock(&mu_);
  return !first_error_.ok();
}

absl::Status CallGroup::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

}  // namespace rpc
}  // namespace psc
