// The server side of the data channel: a plain TCP listener beside a
// ps_server's gRPC port that carries Push and Pull with their tensor bytes
// outside protobuf (wire.h), while gRPC keeps the control plane.
//
// Protocol. A client first calls the ParameterServer.OpenDataChannel RPC
// (token-checked like every RPC), which answers this server's port and a
// fresh ticket (IssueTicket). It connects, sends kHello with the ticket, and
// gets kHelloOk; a missing, wrong, used or expired ticket gets a kResponse
// with UNAUTHENTICATED and the connection is closed. After that the client
// sends kPush / kPull frames, one at a time, and reads one kResponse for
// each, with the same call_id. A malformed frame closes the connection.
// The handler gets the same protos the gRPC service gets, so both transports
// share the semantics (validation, exactly-once, waiting) of the shard.
//
// Lifecycle: Start -> serving (a thread per connection) -> Stop (closes the
// listener and every connection, waits for the threads). Thread-safe.
#ifndef PSC_COMMON_DATA_CHANNEL_DATA_SERVER_H_
#define PSC_COMMON_DATA_CHANNEL_DATA_SERVER_H_

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/socket_stream.h"
#include "common/data_channel/tls.h"
#include "common/data_channel/wire.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace data_channel {

// What the data channel serves. Implementations are thread-safe; a call may
// block until its answer is ready or `deadline` passes.
class DataHandler {
 public:
  virtual ~DataHandler() = default;
  virtual absl::Status Push(const proto::PushRequest& request, absl::Time deadline,
                            proto::PushResponse* response) = 0;
  virtual absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                            proto::PullResponse* response) = 0;
  // Runs before any of a push's tensor bytes are read, with its metadata
  // (tensors without data): OK to read them, or the error the push gets (its
  // bytes are then drained, never stored). The server has already checked
  // that each blob holds exactly the bytes of its tensor's declared shape;
  // a shard also checks that shape against its variables, so a frame can
  // make it hold no more than its variables' size.
  virtual absl::Status CheckPush(const proto::PushRequest& meta) { return absl::OkStatus(); }
};

struct DataServerOptions {
  std::string host = "127.0.0.1";  // bind address (the gRPC server's host)
  int port = 0;                    // 0 = a free port
  // Tensor bytes of one push; a larger push is read, dropped and refused
  // (INVALID_ARGUMENT), and the connection goes on.
  uint64_t max_request_bytes = uint64_t{512} << 20;
  absl::Duration ticket_ttl = absl::Seconds(60);
  absl::Duration hello_timeout = absl::Seconds(10);
  // TLS on every connection (the daemon's --tls_*), the handshake within
  // hello_timeout; null: plaintext.
  std::shared_ptr<const TlsConfig> tls;
  absl::Duration max_wait = absl::Minutes(10);      // for calls that carry no timeout
  absl::Duration send_timeout = absl::Seconds(60);  // to write one response
};

class DataServer {
 public:
  // `handler` is not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<DataServer>> Start(const DataServerOptions& options,
                                                           DataHandler* handler);
  ~DataServer();  // Stop()

  int port() const { return listener_->port(); }
  bool tls() const { return options_.tls != nullptr; }

  // A single-use ticket, valid for options.ticket_ttl.
  absl::StatusOr<std::string> IssueTicket() ABSL_LOCKS_EXCLUDED(mu_);

  // Drains for at most `grace` (see the lifecycle above), then stops; at
  // most `grace` + kStopMargin in all, however the peers behave. Idempotent.
  void Stop(absl::Duration grace = absl::ZeroDuration()) ABSL_LOCKS_EXCLUDED(mu_);
  // After the grace, how long connections get to send their UNAVAILABLE
  // answers before they are shut down unanswered.
  static constexpr absl::Duration kStopMargin = absl::Seconds(1);

  int64_t connections_accepted() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Connection {
    std::unique_ptr<SocketStream> stream;  // closed by its thread at the end, freed when reaped
    std::thread thread;
    bool done = false;  // the thread has finished; join and drop it
  };

  DataServer(const DataServerOptions& options, DataHandler* handler,
             std::unique_ptr<TcpListener> listener);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void Serve(Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Hello(SocketStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether every connection's thread has finished.
  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A connection's messages, reused call after call (protobuf keeps cleared
  // strings' capacity, so tensor buffers are not reallocated).
  struct Scratch {
    proto::PushRequest push;
    proto::PushResponse push_response;
    proto::PullRequest pull;
    proto::PullResponse pull_response;
    std::vector<std::string> storage;
    std::vector<std::string> gradients;  // a push's tensor bytes
  };
  // One request: OK to go on, an error to close the connection.
  absl::Status ServeOne(SocketStream* stream, const FrameHead& head, Scratch* scratch);
  bool RedeemTicket(const std::string& ticket) ABSL_LOCKS_EXCLUDED(mu_);
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DataServerOptions options_;
  DataHandler* const handler_;
  const std::unique_ptr<TcpListener> listener_;
  const Limits limits_;
  const Limits hello_limits_;  // the first frame: a ticket, no tensors
  std::thread acceptor_;
  int drain_[2] = {-1, -1};            // a pipe, written once at Stop: wakes idle connections
  std::atomic<bool> stopping_{false};  // past the grace: a read that ends is answered UNAVAILABLE

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Time> tickets_ ABSL_GUARDED_BY(mu_);  // -> expiry
  int64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_DATA_SERVER_H_
