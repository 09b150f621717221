// Data-channel frames as a hostile peer sends them, to the real DataServer
// in front of a real shard: after a valid hello, the input's bytes are sent
// as they are and the answers read until the server closes. Whatever the
// frames announce, the server must answer or close, never crash, never
// reserve memory for bytes that did not arrive (ASan's allocation limit
// catches that: -rss_limit_mb, -malloc_limit_mb), and leave the accounting
// balanced. Once it has closed, no pull of the connection may still wait:
// every wait ends at its deadline (the shard's timer runs, as in the daemon).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/data_channel/data_server.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/socket_stream.h"
#include "ps_server/data_handler.h"
#include "tests/fuzz/fuzz_shard.h"

namespace {

// A frame's call waits at most kMaxWait (a pull for a version the shard
// does not have); the shard's timer ends it every kExpiry. An input of
// 64 KiB holds at most ~2,200 such pulls, served one after another: about
// 3 s of waits under ASan, inside kClientDeadline.
constexpr absl::Duration kMaxWait = absl::Milliseconds(1);
constexpr absl::Duration kExpiry = absl::Milliseconds(1);
constexpr absl::Duration kClientDeadline = absl::Seconds(8);  // libFuzzer's -timeout is 10 s

struct Fixture {
  // With the timer: without it nothing ends a wait, and the connection's
  // thread would block forever in its pull, holding the request it parsed.
  std::unique_ptr<psc::ps_server::ShardServer> shard =
      psc::fuzz::SmallShard(psc::proto::MODE_ASYNC, kExpiry);
  psc::ps_server::ShardDataHandler handler{shard.get()};
  std::unique_ptr<psc::data_channel::DataServer> server;
  Fixture() {
    psc::data_channel::DataServerOptions options;
    options.max_request_bytes = 1 << 20;
    options.hello_timeout = absl::Seconds(2);
    options.send_timeout = absl::Seconds(2);
    options.max_wait = kMaxWait;
    auto s = psc::data_channel::DataServer::Start(options, &handler);
    if (!s.ok()) std::abort();
    server = *std::move(s);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psc::data_channel;
  static Fixture* fixture = new Fixture();
  if (size > (64 << 10)) return 0;
  const absl::Time deadline = absl::Now() + kClientDeadline;
  auto ticket = fixture->server->IssueTicket();
  auto stream = ConnectTcp("127.0.0.1", fixture->server->port(), deadline);
  if (!ticket.ok() || !stream.ok()) std::abort();
  FrameHeader hello;
  hello.kind = Kind::kHello;
  if (!SendFrame(stream->get(), hello, *ticket, {}, deadline).ok()) std::abort();
  auto ok = ReceiveFrameHead(stream->get(), {}, deadline);
  if (!ok.ok() || ok->header.kind != Kind::kHelloOk) std::abort();
  (void)(*stream)->WriteAll({{const_cast<uint8_t*>(data), size}}, deadline);
  (*stream)->ShutdownWrite();
  // Read answers until the server closes (it reads what was sent, then
  // finds the end of the stream), at most 1 MiB of them.
  char c;
  absl::Status read;
  for (int i = 0; i < (1 << 20) && read.ok(); ++i) read = (*stream)->ReadExact(&c, 1, deadline);
  if (absl::IsDeadlineExceeded(read)) {
    // Every call of the input is bounded (kMaxWait, the server's timeouts),
    // so a server that neither answers nor closes is stuck: a wait that
    // never ends.
    std::fprintf(stderr, "the server neither answered nor closed within %s (%d pulls waiting)\n",
                 absl::FormatDuration(kClientDeadline).c_str(),
                 fixture->shard->shard().num_waiters());
    std::abort();
  }
  if (!read.ok()) {
    // Closed: the connection's thread is past its last call, so each of its
    // pulls that waited has ended and left the shard.
    if (const int waiting = fixture->shard->shard().num_waiters(); waiting != 0) {
      std::fprintf(stderr, "the server closed with %d pulls still waiting\n", waiting);
      std::abort();
    }
  }
  psc::fuzz::CheckAccounting(*fixture->shard);
  return 0;
}
