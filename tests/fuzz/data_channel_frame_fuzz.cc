// Data-channel frames as a hostile peer sends them, to the real DataServer
// in front of a real shard: after a valid hello, the input's bytes are sent
// as they are and the answers read until the server closes. Whatever the
// frames announce, the server must answer or close, never crash, never
// reserve memory for bytes that did not arrive (ASan's allocation limit
// catches that: -rss_limit_mb, -malloc_limit_mb), and leave the accounting
// balanced.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/data_channel/data_server.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/socket_stream.h"
#include "ps_server/data_handler.h"
#include "tests/fuzz/fuzz_shard.h"

namespace {

struct Fixture {
  std::unique_ptr<psc::ps_server::ShardServer> shard =
      psc::fuzz::SmallShard(psc::proto::MODE_ASYNC);
  psc::ps_server::ShardDataHandler handler{shard.get()};
  std::unique_ptr<psc::data_channel::DataServer> server;
  Fixture() {
    psc::data_channel::DataServerOptions options;
    options.max_request_bytes = 1 << 20;
    options.hello_timeout = absl::Seconds(2);
    options.send_timeout = absl::Seconds(2);
    options.max_wait = absl::Milliseconds(10);
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
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
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
  for (int i = 0; i < (1 << 20); ++i) {
    if (!(*stream)->ReadExact(&c, 1, deadline).ok()) break;
  }
  psc::fuzz::CheckAccounting(*fixture->shard);
  return 0;
}
