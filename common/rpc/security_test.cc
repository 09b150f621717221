#include "common/rpc/security.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace rpc {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(SecurityOptionsTest, NothingGivenMeansPlaintextWithoutToken) {
  auto s = LoadSecurityOptions("", "", "", "");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->tls);
  EXPECT_TRUE(s->token.empty());
}

TEST(SecurityOptionsTest, LoadsTokenAndPemFiles) {
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  auto s = LoadSecurityOptions(WriteFile("sec_token", "0123456789abcdef0123\n"),
                               WriteFile("sec_cert.pem", pem), WriteFile("sec_key.pem", pem),
                               WriteFile("sec_ca.pem", pem));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->tls);
  EXPECT_EQ(s->token, "0123456789abcdef0123");
  EXPECT_EQ(s->tls_ca_pem, pem);
}

TEST(SecurityOptionsTest, RejectsPartialTlsMissingAndNonPemFiles) {
  const std::string pem = WriteFile("sec_ok.pem", "-----BEGIN X-----\n");
  const std::string junk = WriteFile("sec_junk.pem", "not a certificate");
  auto partial = LoadSecurityOptions("", pem, pem, "");
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(partial.status().message(), HasSubstr("TLS needs all three"));
  auto missing = LoadSecurityOptions("", pem, "/nonexistent/key.pem", pem);
  EXPECT_THAT(missing.status().message(), HasSubstr("--tls_key=/nonexistent/key.pem: cannot read"));
  auto not_pem = LoadSecurityOptions("", pem, pem, junk);
  EXPECT_THAT(not_pem.status().message(), HasSubstr("--tls_ca=" + junk + ": not a PEM file"));
  auto bad_token = LoadSecurityOptions(WriteFile("sec_short", "abc"), "", "", "");
  EXPECT_EQ(bad_token.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ListenPolicyTest, NonLoopbackNeedsATokenOrAllowInsecure) {
  SecurityOptions none, with_token;
  with_token.token = "0123456789abcdef0123";
  EXPECT_TRUE(CheckListenAllowed("127.0.0.1", none, false).ok());
  EXPECT_TRUE(CheckListenAllowed("::1", none, false).ok());
  EXPECT_TRUE(CheckListenAllowed("localhost", none, false).ok());
  absl::Status refused = CheckListenAllowed("0.0.0.0", none, false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("--allow_insecure"));
  EXPECT_FALSE(CheckListenAllowed("10.1.2.3", none, false).ok());
  EXPECT_TRUE(CheckListenAllowed("0.0.0.0", with_token, false).ok());
  EXPECT_TRUE(CheckListenAllowed("0.0.0.0", none, true).ok());
}

}  // namespace
}  // namespace rpc
}  // namespace psc
