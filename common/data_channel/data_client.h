// The client side of one data-channel connection (see data_server.h): Push
// and Pull to one ps_server with the tensor bytes outside protobuf.
#ifndef PSC_COMMON_DATA_CHANNEL_DATA_CLIENT_H_
#define PSC_COMMON_DATA_CHANNEL_DATA_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data_channel/socket_stream.h"
#include "common/data_channel/tls.h"
#include "common/data_channel/wire.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace data_channel {

// One call at a time (callers serialize); Abort() is thread-safe.
//
// Each call tells the server to give up a fifth of the time left (at most
// 1 s) before `deadline`, so that its answer arrives in time.
//
// Errors: the server's status for a request it answered (the connection stays
// usable); UNAVAILABLE when the connection fails, and DEADLINE_EXCEEDED when
// the deadline passes, after which the connection is broken() (a late answer
// would be out of step) and must be replaced.
class DataConnection {
 public:
  // Connects (in TLS when `tls` is given: the server's certificate must be
  // the CA's and name `host`) and presents `ticket`. UNAUTHENTICATED for a
  // refused ticket; UNAVAILABLE / DEADLINE_EXCEEDED for connection and
  // handshake failures.
  static absl::StatusOr<std::unique_ptr<DataConnection>> Open(const std::string& host, int port,
                                                              const std::string& ticket,
                                                              absl::Time deadline,
                                                              const TlsConfig* tls = nullptr);

  absl::Status Push(const proto::PushRequest& request, absl::Time deadline,
                    proto::PushResponse* response);
  absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                    proto::PullResponse* response);

  // Ends the connection; a call in progress fails with UNAVAILABLE.
  void Abort() { stream_->Shutdown(); }
  bool broken() const { return broken_ || stream_->is_shut_down(); }

 private:
  explicit DataConnection(std::unique_ptr<SocketStream> stream) : stream_(std::move(stream)) {}
  template <typename Response>
  absl::Status Call(Kind kind, const std::string& meta, absl::Span<const absl::string_view> blobs,
                    absl::Time deadline, Response* response);

  std::unique_ptr<SocketStream> stream_;
  uint64_t next_call_ = 1;
  std::vector<std::string> spare_;  // tensor buffers kept between calls
  bool broken_ = false;
};

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_DATA_CLIENT_H_
