// The one adapter every pscluster gRPC service is built on. A service is a
// set of unary methods, each a thin function over a transport-free core;
// what every call of every method needs is done here, once:
//
//   the cluster token is checked first (UNAUTHENTICATED, nothing read);
//   the request body is parsed here, not by gRPC, so one that does not
//   parse is INVALID_ARGUMENT naming the message type (gRPC's generated
//   callback handler answers UNIMPLEMENTED with an empty message);
//   no exception crosses into gRPC: std::bad_alloc is RESOURCE_EXHAUSTED,
//   any other exception INTERNAL naming the method and what() (gRPC would
//   turn it into UNIMPLEMENTED, empty); the cores validate a whole request
//   before they change anything, so the state is unchanged either way;
//   a call is finished exactly once (a second finish is ignored);
//   every method of the service's .proto is registered with the right
//   request and response types (GrpcServer::Start refuses a service that
//   is not: Check()).
//
// Methods are registered as raw callback methods (grpc::ByteBuffer in and
// out), with the message types checked against the service descriptor.
//
//   class WorkerService final : public rpc::UnaryService {
//     WorkerService(...) : UnaryService("psc.proto.Worker", token) {
//       AddMethod<proto::GetStatusRequest, proto::WorkerStatus>(
//           "GetStatus", [this](grpc::CallbackServerContext*, const auto& req, auto* resp) {
//             *resp = core_->Status(...);
//             return absl::OkStatus();
//           });
//     }
//   };
#ifndef PSC_COMMON_RPC_UNARY_SERVICE_H_
#define PSC_COMMON_RPC_UNARY_SERVICE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"

namespace psc {
namespace rpc {

// Finishes a call; call it exactly once, from any thread. Later calls are
// ignored.
using Done = std::function<void(absl::Status)>;

class UnaryService : public grpc::Service {
 public:
  // A method that answers before it returns.
  template <typename Request, typename Response>
  using SyncHandler =
      std::function<absl::Status(grpc::CallbackServerContext*, const Request&, Response*)>;
  // A method that answers later (a waiting pull): `request` and `response`
  // stay valid until `done` runs.
  template <typename Request, typename Response>
  using AsyncHandler =
      std::function<void(grpc::CallbackServerContext*, const Request&, Response*, Done)>;

  // OK when every method of the service is registered with its types.
  absl::Status Check() const;

  const std::string& service_name() const { return service_name_; }

 protected:
  // `service` is the .proto service's full name ("psc.proto.Worker");
  // `token` the cluster token every call must carry ("" accepts all).
  UnaryService(absl::string_view service, std::string token);

  template <typename Request, typename Response>
  void AddMethod(absl::string_view method, SyncHandler<Request, Response> handler) {
    AddAsyncMethod<Request, Response>(
        method, [handler = std::move(handler)](
                    grpc::CallbackServerContext* context, const Request& request,
                    Response* response, Done done) { done(handler(context, request, response)); });
  }

  template <typename Request, typename Response>
  void AddAsyncMethod(absl::string_view method, AsyncHandler<Request, Response> handler);

 private:
  // Records `method` as registered (or the mismatch Check reports) and
  // returns its path, "/<service>/<method>", stable for the service's life.
  const char* Register(absl::string_view method, const google::protobuf::Descriptor* request_type,
                       const google::protobuf::Descriptor* response_type);

  const std::string service_name_;
  const TokenAuthenticator auth_;
  std::deque<std::string> paths_;       // what gRPC's method table points to
  std::deque<std::string> registered_;  // method names
  absl::Status registration_;           // the first registration error
};

namespace internal {

// One call in flight: the parsed request, the response, and the finish-once
// flag. Shared by the handler and its Done.
template <typename Request, typename Response>
struct UnaryCall {
  grpc::ServerUnaryReactor* reactor = nullptr;
  grpc::ByteBuffer* out = nullptr;
  std::string method;
  Request request;
  Response response;
  std::atomic<bool> finished{false};

  void Finish(absl::Status status) {
    if (finished.exchange(true)) return;
    grpc::Status answer = ToGrpcStatus(status);
    if (status.ok()) {
      bool own = false;
      try {
        grpc::Status s = grpc::SerializationTraits<Response>::Serialize(response, out, &own);
        if (!s.ok()) {
          answer = grpc::Status(grpc::StatusCode::INTERNAL,
                                absl::StrCat(method, ": cannot serialize the response"));
        }
      } catch (const std::bad_alloc&) {
        answer = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              absl::StrCat(method, ": out of memory serializing the response"));
      }
    }
    reactor->Finish(answer);
  }
};

// What an exception thrown by a handler becomes.
absl::Status ExceptionStatus(absl::string_view method, std::exception_ptr e);

}  // namespace internal

template <typename Request, typename Response>
void UnaryService::AddAsyncMethod(absl::string_view method,
                                  AsyncHandler<Request, Response> handler) {
  const char* path = Register(method, Request::descriptor(), Response::descriptor());
  auto* grpc_handler = new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
      [this, path, handler = std::move(handler)](grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* body,
                                                 grpc::ByteBuffer* out) {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        if (grpc::Status auth = auth_.Check(*context); !auth.ok()) {
          reactor->Finish(auth);
          return reactor;
        }
        std::shared_ptr<internal::UnaryCall<Request, Response>> call;
        try {
          call = std::make_shared<internal::UnaryCall<Request, Response>>();
          call->reactor = reactor;
          call->out = out;
          call->method = path;
          grpc::ByteBuffer copy(*body);  // Deserialize consumes its buffer
          if (!grpc::SerializationTraits<Request>::Deserialize(&copy, &call->request).ok()) {
            call->Finish(absl::InvalidArgumentError(absl::StrCat(
                path, ": the request body is not a valid ", Request::descriptor()->full_name())));
            return reactor;
          }
          handler(context, call->request, &call->response,
                  [call](absl::Status status) { call->Finish(std::move(status)); });
        } catch (...) {
          absl::Status error = internal::ExceptionStatus(path, std::current_exception());
          if (call != nullptr) {
            call->Finish(std::move(error));
          } else {
            reactor->Finish(ToGrpcStatus(error));
          }
        }
        return reactor;
      });
  auto* m =
      new grpc::internal::RpcServiceMethod(path, grpc::internal::RpcMethod::NORMAL_RPC, nullptr);
  grpc::Service::AddMethod(m);
  grpc::Service::MarkMethodRawCallback(static_cast<int>(registered_.size()) - 1, grpc_handler);
}

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_UNARY_SERVICE_H_
