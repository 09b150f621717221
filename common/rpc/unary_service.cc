#include "common/rpc/unary_service.h"

#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace psc {
namespace rpc {

UnaryService::UnaryService(absl::string_view service, std::string token)
    : service_name_(service), auth_(std::move(token)) {
  if (google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name_) ==
      nullptr) {
    registration_ = absl::InternalError(absl::StrCat("no .proto service \"", service, "\""));
  }
}

const char* UnaryService::Register(absl::string_view method,
                                   const google::protobuf::Descriptor* request_type,
                                   const google::protobuf::Descriptor* response_type) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name_);
  const google::protobuf::MethodDescriptor* m =
      service == nullptr ? nullptr : service->FindMethodByName(std::string(method));
  if (registration_.ok()) {
    if (m == nullptr) {
      registration_ =
          absl::InternalError(absl::StrCat(service_name_, " has no method \"", method, "\""));
    } else if (m->input_type() != request_type || m->output_type() != response_type) {
      registration_ = absl::InternalError(absl::StrCat(
          service_name_, ".", method, " is registered with ", request_type->full_name(), " -> ",
          response_type->full_name(), "; the .proto says ", m->input_type()->full_name(), " -> ",
          m->output_type()->full_name()));
    } else if (m->client_streaming() || m->server_streaming()) {
      registration_ =
          absl::InternalError(absl::StrCat(service_name_, ".", method, " is a streaming method"));
    }
  }
  registered_.emplace_back(method);
  return paths_.emplace_back(absl::StrCat("/", service_name_, "/", method)).c_str();
}

absl::Status UnaryService::Check() const {
  if (!registration_.ok()) return registration_;
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name_);
  std::vector<std::string> missing;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string& name = service->method(i)->name();
    int times = 0;
    for (const std::string& r : registered_) times += r == name;
    if (times != 1) missing.push_back(absl::StrCat(name, times == 0 ? "" : " (twice)"));
  }
  if (!missing.empty()) {
    return absl::InternalError(absl::StrCat(
        service_name_, ": methods without exactly one handler: ", absl::StrJoin(missing, ", ")));
  }
  return absl::OkStatus();
}

namespace internal {

absl::Status ExceptionStatus(absl::string_view method, std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(method, ": out of memory"));
  } catch (const std::exception& x) {
    return absl::InternalError(absl::StrCat(method, ": unexpected exception: ", x.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(method, ": unexpected exception of unknown type"));
  }
}

}  // namespace internal
}  // namespace rpc
}  // namespace psc
