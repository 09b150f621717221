// Integration: a cluster over mutual TLS. A throwaway CA and certificates are
// made with openssl; the chief finds the cluster over TLS with the token; a
// client without the CA, without a client certificate, in plaintext, or
// without the token is refused.
#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/security.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/parameter_server.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "tls-cluster-token-0123456789abcdef";

// Runs openssl with `args`; fails the test on a non-zero exit.
void OpenSsl(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  auto r = RunProgram(args, {{"HOME", dir}, {"RANDFILE", dir + "/.rnd"}}, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit.ToString(), "exit 0") << r->err;
}

// A CA and one certificate signed by it for 127.0.0.1 (used by every daemon
// as server and client certificate), plus a second CA that signed nothing.
void MakeCertificates(const std::string& dir) {
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                       "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  OpenSsl(dir, with({"req", "-x509", "-days", "2", "-subj", "/CN=psc-test-ca", "-keyout",
                     dir + "/ca.key", "-out", dir + "/ca.pem"},
                    ec));
  OpenSsl(dir, with({"req", "-x509", "-days", "2", "-subj", "/CN=other-ca", "-keyout",
                     dir + "/other.key", "-out", dir + "/other.pem"},
                    ec));
  OpenSsl(dir, with({"req", "-subj", "/CN=127.0.0.1", "-keyout", dir + "/node.key", "-out",
                     dir + "/node.csr"},
                    ec));
  WriteFile(dir + "/ext.cnf",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  OpenSsl(dir, {"x509", "-req", "-days", "2", "-in", dir + "/node.csr", "-CA", dir + "/ca.pem",
                "-CAkey", dir + "/ca.key", "-CAcreateserial", "-extfile", dir + "/ext.cnf", "-out",
                dir + "/node.pem"});
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tls");
    ASSERT_NO_FATAL_FAILURE(MakeCertificates(dir_));
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

// The data channel is plain TCP: with TLS the server does not offer it (its
// bytes would bypass TLS), and OpenDataChannel says so.
TEST_F(TlsTest, NoDataChannelUnderTls) {
  EXPECT_THAT(daemons_[0]->Log(), ::testing::Not(HasSubstr("data channel on")));
  auto stub = proto::ParameterServer::NewStub(
      rpc::CreateChannel(spec_.Address(cluster::TaskType::kPs, 0), security_));
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Seconds(30));
  proto::OpenDataChannelResponse offer;
  grpc::Status s = stub->OpenDataChannel(&context, proto::OpenDataChannelRequest(), &offer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
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
