// Integration: a cluster over mutual TLS. A throwaway CA and certificates are
// made with openssl; the chief finds the cluster over TLS with the token; a
// client without the CA, without a client certificate, in plaintext, or
// without the token is refused; the data channel runs in TLS, and a job
// trains under TLS.
#include "common/data_channel/tls.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/data_channel/data_client.h"
#include "common/ps_client/data_channel_path.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/rpc/grpc_shard_transport.h"
#include "common/rpc/security.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/test_certificates.h"
#include "proto/health.grpc.pb.h"
#include "proto/parameter_server.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "tls-cluster-token-0123456789abcdef";

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tls");
    const absl::Status made = launcher::MakeTestCertificates(dir_);
    ASSERT_TRUE(made.ok()) << made;
    WriteFile(dir_ + "/token", kToken);
    flags_ = {"--auth_token_file=" + dir_ + "/token", "--tls_cert=" + dir_ + "/node.pem",
              "--tls_key=" + dir_ + "/node.key", "--tls_ca=" + dir_ + "/ca.pem"};
    auto security = rpc::LoadSecurityOptions(dir_ + "/token", dir_ + "/node.pem",
                                             dir_ + "/node.key", dir_ + "/ca.pem");
    ASSERT_TRUE(security.ok()) << security.status();
    security_ = *security;
    for (cluster::TaskType type : {cluster::TaskType::kPs, cluster::TaskType::kWorker}) {
      for (size_t i = 0; i < spec_.cluster().at(std::string(cluster::TaskTypeName(type))).size();
           ++i) {
        auto d = Daemon::Start(type == cluster::TaskType::kPs ? "ps_server" : "worker",
                               spec_.TfConfig(type, static_cast<int>(i)), flags_, dir_);
        ASSERT_TRUE(d.ok());
        daemons_.push_back(*std::move(d));
      }
    }
    ASSERT_TRUE(
        WaitForServing(spec_.Address(cluster::TaskType::kPs, 0), security_, absl::Seconds(30)).ok())
        << daemons_[0]->Log();
  }

  grpc::Status GetStats(const rpc::SecurityOptions& security, const std::string& token) {
    auto channel = rpc::CreateChannel(spec_.Address(cluster::TaskType::kPs, 0), security);
    grpc::ClientContext context;
    rpc::PrepareContext(&context, {.token = token}, absl::Seconds(10));
    proto::ShardStats stats;
    return proto::ParameterServer::NewStub(channel)->GetStats(&context, {}, &stats);
  }

  std::string dir_;
  std::vector<std::string> flags_;
  rpc::SecurityOptions security_;
  ClusterSpec spec_{1, 2};
  std::vector<std::unique_ptr<Daemon>> daemons_;
};

TEST_F(TlsTest, ChiefFindsTheClusterOverTls) {
  std::vector<std::string> argv = {BinPath("chief"), "--check_cluster", "--startup_timeout=30s"};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  auto r = RunProgram(argv, {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}},
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->err;
  EXPECT_THAT(r->out, HasSubstr("cluster ready: 3 tasks answer"));
  for (auto& d : daemons_) EXPECT_THAT(d->Log(), HasSubstr("(TLS, token required)"));
}

// Under TLS the data channel runs in TLS too: the server says so, a client
// with the cluster's certificate reaches the shard through it (the call is
// answered, and counted as a data-channel call), a client that trusts
// another CA or speaks plaintext is refused in the handshake, and a client
// whose own channel would be plaintext declines it and uses gRPC.
TEST_F(TlsTest, TheDataChannelRunsInTls) {
  EXPECT_THAT(daemons_[0]->Log(),
              ::testing::ContainsRegex("data channel on 127.0.0.1:[0-9]+ \\(TLS\\)"));
  const std::string address = spec_.Address(cluster::TaskType::kPs, 0);
  rpc::GrpcShardTransport control(address, security_);
  proto::OpenDataChannelResponse offer;
  ASSERT_TRUE(control.OpenDataChannel(&offer, {.timeout = absl::Seconds(30)}).ok());
  EXPECT_TRUE(offer.tls());

  // Through the TLS channel: a pull of a shard with no variables yet is
  // answered (an error of the shard's, not of the connection).
  rpc::GrpcParameterClient client({address}, security_, absl::Seconds(5));
  std::vector<proto::PullResponse> pulled;
  absl::Status pull = client.PullAll({proto::PullRequest()}, &pulled, absl::Seconds(10));
  EXPECT_FALSE(absl::IsUnavailable(pull)) << pull;
  EXPECT_EQ(client.data_channel_calls(), 1) << pull;

  auto tls = data_channel::TlsConfig::Create(security_.tls_cert_pem, security_.tls_key_pem,
                                             security_.tls_ca_pem);
  ASSERT_TRUE(tls.ok()) << tls.status();
  auto other = data_channel::TlsConfig::Create(security_.tls_cert_pem, security_.tls_key_pem,
                                               ReadFile(dir_ + "/other.pem"));
  ASSERT_TRUE(other.ok()) << other.status();
  auto open = [&](const data_channel::TlsConfig* config) {
    proto::OpenDataChannelResponse o;
    EXPECT_TRUE(control.OpenDataChannel(&o, {.timeout = absl::Seconds(30)}).ok());
    return data_channel::DataConnection::Open("127.0.0.1", o.port(), o.ticket(),
                                              absl::Now() + absl::Seconds(10), config);
  };
  EXPECT_TRUE(open(tls->get()).ok());
  // A client that trusts another CA refuses the server's certificate.
  auto distrusting = open(other->get());
  EXPECT_EQ(distrusting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(distrusting.status().message()),
              HasSubstr("TLS handshake: the server's certificate: "));  // then X509's reason
  // A plaintext client gets no answer to its hello: the server wanted TLS.
  auto plaintext = open(nullptr);
  EXPECT_FALSE(plaintext.ok());
  // The server's certificate must name the host dialled: "localhost" is in
  // it, another name is not.
  proto::OpenDataChannelResponse o;
  ASSERT_TRUE(control.OpenDataChannel(&o, {.timeout = absl::Seconds(30)}).ok());
  EXPECT_TRUE(data_channel::DataConnection::Open("localhost", o.port(), o.ticket(),
                                                 absl::Now() + absl::Seconds(10), tls->get())
                  .ok());
  // A client whose channel would be plaintext declines the TLS one.
  ps_client::DataChannelPath plain_path("127.0.0.1", &control, nullptr);
  proto::PullResponse response;
  EXPECT_FALSE(
      plain_path.Pull(proto::PullRequest(), &response, {.timeout = absl::Seconds(10)}).has_value());
}

// A whole job under TLS, its tensors over the TLS data channel.
TEST_F(TlsTest, AJobTrainsUnderTls) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  std::vector<std::string> argv = {BinPath("chief"),
                                   "--startup_timeout=30s",
                                   "--model=mlp",
                                   "--epochs=1",
                                   "--steps_per_epoch=10",
                                   "--intra_op_threads=1",
                                   "--max_train_examples=1280"};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  auto r = RunProgram(argv, {{"TF_CONFIG", spec_.TfConfig(cluster::TaskType::kChief, 0)}},
                      absl::Seconds(120));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 0") << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("test_accuracy"));
  for (auto& d : daemons_) {
    EXPECT_THAT(d->Log(), Not(HasSubstr("Push and Pull go over gRPC"))) << d->Log();
  }
}

TEST_F(TlsTest, TheRightClientIsServed) {
  grpc::Status s = GetStats(security_, kToken);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(TlsTest, AClientWithoutTheCaCannotConnect) {
  rpc::SecurityOptions no_ca = security_;
  no_ca.tls_ca_pem = ReadFile(dir_ + "/other.pem");  // trusts another CA only
  grpc::Status s = GetStats(no_ca, kToken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, AClientWithoutACertificateCannotConnect) {
  rpc::SecurityOptions no_cert = security_;
  no_cert.tls_cert_pem.clear();
  no_cert.tls_key_pem.clear();
  grpc::Status s = GetStats(no_cert, kToken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, APlaintextClientCannotConnect) {
  grpc::Status s = GetStats({}, kToken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, TheTokenIsCheckedOverTlsToo) {
  grpc::Status s = GetStats(security_, "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = GetStats(security_, "wrong-token-0123456789abcdef");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
}

TEST_F(TlsTest, HealthNeedsTheTokenOverTls) {
  auto channel = rpc::CreateChannel(spec_.Address(cluster::TaskType::kPs, 0), security_);
  for (const std::string& token : {std::string(), std::string(kToken)}) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, {.token = token}, absl::Seconds(10));
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = grpc::health::v1::Health::NewStub(channel)->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &response);
    if (token.empty()) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace psc
