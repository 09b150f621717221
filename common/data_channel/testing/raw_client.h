// Tests only: a data-channel client that writes frames by hand, whole or in
// pieces, so that a test can leave a request half sent (a push in flight
// when a server stops) or send what a well-behaved client never would (a
// push before the hello).
#ifndef PSC_COMMON_DATA_CHANNEL_TESTING_RAW_CLIENT_H_
#define PSC_COMMON_DATA_CHANNEL_TESTING_RAW_CLIENT_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/socket_stream.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace data_channel {
namespace testing {

// A request's frame as bytes: everything before the blobs, and the blobs.
struct FrameBytes {
  std::string head;   // header, size table and meta
  std::string blobs;  // every blob, in order
  std::string All() const { return head + blobs; }
};
FrameBytes PushFrame(const proto::PushRequest& push, uint64_t call_id);
FrameBytes PullFrame(const proto::PullRequest& pull, uint64_t call_id);

// A pull for `min_version` on a DataConnection of its own (opened with
// `ticket`), in a thread of its own: its status goes to *status, which must
// outlive the thread; the caller joins it.
std::thread PullInThread(const std::string& host, int port, const std::string& ticket,
                         int64_t min_version, absl::Time deadline, absl::Status* status);

// Thread-compatible.
class RawClient {
 public:
  // Connected to host:port, and (with a ticket) past the hello.
  static absl::StatusOr<RawClient> Connect(const std::string& host, int port, absl::Time deadline);
  static absl::StatusOr<RawClient> Open(const std::string& host, int port,
                                        const std::string& ticket, absl::Time deadline);

  absl::Status Send(const std::string& bytes, absl::Time deadline);
  // The next frame's head (an answer; its blobs are read and dropped).
  absl::StatusOr<FrameHead> Receive(absl::Time deadline);
  // Whether the server closes the connection (nothing more to read) by `deadline`.
  bool EndsBy(absl::Time deadline);
  SocketStream* stream() { return stream_.get(); }

 private:
  explicit RawClient(std::unique_ptr<SocketStream> s) : stream_(std::move(s)) {}
  std::unique_ptr<SocketStream> stream_;
};

}  // namespace testing
}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_TESTING_RAW_CLIENT_H_
