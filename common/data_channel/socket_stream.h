// A connected TCP socket with deadlines: blocking I/O bounded by
// SO_RCVTIMEO/SO_SNDTIMEO set from each call's deadline (a whole tensor is
// one recv(MSG_WAITALL): one wake-up, not one per segment), and Shutdown()
// from another thread ends a blocked call at once. TCP_NODELAY is on.
// StartTls puts TLS under both (tls.h): the same calls, deadlines and
// Shutdown, through OpenSSL.
#ifndef PSC_COMMON_DATA_CHANNEL_SOCKET_STREAM_H_
#define PSC_COMMON_DATA_CHANNEL_SOCKET_STREAM_H_

#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace psc {
namespace data_channel {

// One thread reads and one thread writes at a time; Shutdown() is
// thread-safe.
class SocketStream {
 public:
  // Takes ownership of the connected socket `fd`.
  explicit SocketStream(int fd);
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  // Writes every byte of `iov` (the vector is consumed). UNAVAILABLE when the
  // connection fails or was shut down, DEADLINE_EXCEEDED at the deadline.
  absl::Status WriteAll(std::vector<iovec> iov, absl::Time deadline);
  // Reads exactly `n` bytes. UNAVAILABLE on end of stream ("connection closed
  // by the peer") or failure, DEADLINE_EXCEEDED at the deadline.
  absl::Status ReadExact(char* p, size_t n, absl::Time deadline);

  // The TLS handshake, as the server (verifying the client's certificate)
  // or the client (verifying the server's, and that it names `peer_host`).
  // Before any other I/O. UNAVAILABLE naming the reason (e.g. "certificate
  // verify failed"), DEADLINE_EXCEEDED at the deadline; the stream is then
  // unusable.
  absl::Status StartTls(SSL_CTX* ctx, bool server, const std::string& peer_host,
                        absl::Time deadline);
  bool tls() const { return ssl_ != nullptr; }

  // Ends the connection both ways; pending and later I/O fail with
  // UNAVAILABLE. Idempotent.
  void Shutdown();
  bool is_shut_down() const { return shut_down_.load(); }
  // Closes the socket now (a peer still sending is reset) and frees the TLS
  // session; the stream is shut down from then on and the destructor closes
  // nothing more. So its owner can close it and free it later. Idempotent;
  // not concurrent with Shutdown (DataServer calls both under its lock).
  void Close();
  // Ends the sending side only: the peer reads the end of the stream, and
  // this side can still read its answers.
  void ShutdownWrite();
  // Ends the receiving side only: a read blocked in another thread, and
  // every later one, ends as at the end of the stream; this side can still
  // send (an answer before it closes).
  void ShutdownRead();

  // Waits until the stream has something for a read (bytes, TLS bytes
  // already decrypted, its end, or an error: the read says which): true;
  // or until `wake_fd` (a pipe's read end) is readable while the stream has
  // nothing: false. DEADLINE_EXCEEDED at `deadline`. Reads nothing.
  absl::StatusOr<bool> WaitReadable(int wake_fd, absl::Time deadline);
  // Whether bytes of the peer's are waiting to be read. Does not block on a
  // plain socket; on TLS it may wait for a record, so call it after
  // ShutdownRead.
  bool HasInput();

 private:
  absl::Status WriteTls(const std::vector<iovec>& iov, absl::Time deadline);
  absl::Status ReadTls(char* p, size_t n, absl::Time deadline);
  // An SSL call's result as a status: OK to retry (the timeout slice
  // passed or the call was interrupted), or the error.
  absl::Status TlsResult(int ret, const char* what, absl::Time deadline, bool* retry);

  int fd_;  // -1 once closed
  std::atomic<bool> shut_down_{false};
  SSL* ssl_ = nullptr;
};

// Connects to host:port (IPv4 or IPv6, first address that answers).
// UNAVAILABLE naming the address and the OS error; DEADLINE_EXCEEDED.
absl::StatusOr<std::unique_ptr<SocketStream>> ConnectTcp(const std::string& host, int port,
                                                         absl::Time deadline);

// A listening TCP socket. Accept blocks until a connection or Shutdown().
class TcpListener {
 public:
  // Binds host:port (port 0 = any free port) with a backlog of 64.
  // UNAVAILABLE with the OS's reason.
  static absl::StatusOr<std::unique_ptr<TcpListener>> Listen(const std::string& host, int port);
  ~TcpListener();
  int port() const { return port_; }
  // CANCELLED after Shutdown(); UNAVAILABLE for other failures.
  absl::StatusOr<std::unique_ptr<SocketStream>> Accept();
  // Makes a blocked and every later Accept return CANCELLED. Thread-safe.
  void Shutdown();

 private:
  TcpListener(int fd, int port);
  const int fd_;
  const int port_;
  int wake_[2] = {-1, -1};  // a pipe; Shutdown writes to it
  std::atomic<bool> shut_down_{false};
};

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_SOCKET_STREAM_H_
