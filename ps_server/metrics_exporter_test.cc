#include "ps_server/metrics_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

// A plain HTTP/1.0 GET on 127.0.0.1:port; returns the whole reply.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  for (int i = 0; i < 10000; ++i) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, n);
  }
  close(fd);
  return out;
}

// The server's stats as main.cc exports them, with no timer running.
ShardServerOptions Options(base::Clock* clock) {
  ShardServerOptions options;
  options.shard.clock = clock;
  options.expiry_interval = absl::ZeroDuration();
  return options;
}

TEST(MetricsExporterTest, ServesTheShardCountersOverHttp) {
  base::FakeClock clock;
  ShardServer server(Options(&clock));
  Shard& shard = server.shard();
  proto::ConfigureRequest config;
  config.set_num_shards(1);
  config.set_num_workers(1);
  config.mutable_policy()->set_mode(proto::MODE_ASYNC);
  config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  ASSERT_TRUE(shard.Configure(config).ok());
  proto::CreateVariablesRequest create;
  auto* v = create.add_variables();
  v->set_name("w");
  tensor::SetFloatTensor({2}, std::vector<float>{1, 2}, v->mutable_tensor());
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  proto::PushRequest push;
  auto* g = push.add_gradients();
  g->set_name("w");
  tensor::SetFloatTensor({2}, std::vector<float>{1, 1}, g->mutable_tensor());
  proto::PushResponse pushed;
  ASSERT_TRUE(shard.Push(push, &pushed).ok());

  auto exporter = MetricsExporter::Start("127.0.0.1:0", [&server] { return server.Stats(); });
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);
  const std::string reply = HttpGet((*exporter)->port(), "/metrics");
  EXPECT_THAT(reply, HasSubstr("200 OK"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_version{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_pushes_accepted_total{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_gradients_applied_total{shard=\"0\"} 1"));
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_staleness_count{shard=\"0\"} 1"));
  // One worker and slot: its watermark and the id above it.
  EXPECT_THAT(reply, HasSubstr("pscluster_ps_ledger_entries{shard=\"0\"} 2"));
}

TEST(MetricsExporterTest, AnAddressInUseIsAnError) {
  base::FakeClock clock;
  ShardServer server(Options(&clock));
  auto stats = [&server] { return server.Stats(); };
  auto first = MetricsExporter::Start("127.0.0.1:0", stats);
  ASSERT_TRUE(first.ok());
  auto second = MetricsExporter::Start(absl::StrCat("127.0.0.1:", (*first)->port()), stats);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("cannot serve metrics on 127.0.0.1:"));
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
