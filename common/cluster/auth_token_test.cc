#include "common/cluster/auth_token.h"

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace cluster {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(AuthTokenTest, LoadsAndTrimsTrailingWhitespace) {
  auto t = LoadAuthToken(WriteFile("tok1", "0123456789abcdef0123\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "0123456789abcdef0123");
}

TEST(AuthTokenTest, RejectsBadFiles) {
  EXPECT_THAT(LoadAuthToken("/nonexistent/token").status().message(),
              HasSubstr("--auth_token_file=/nonexistent/token: cannot read"));
  EXPECT_THAT(LoadAuthToken(WriteFile("tok2", "short\n")).status().message(),
              HasSubstr("use at least 16"));
  EXPECT_THAT(LoadAuthToken(WriteFile("tok3", "0123456789 abcdef0123")).status().message(),
              HasSubstr("printable ASCII without spaces"));
  EXPECT_EQ(LoadAuthToken(WriteFile("tok4", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AuthTokenTest, BearerCheck) {
  const std::string token = "0123456789abcdef0123";
  absl::string_view good = "Bearer 0123456789abcdef0123";
  absl::string_view wrong = "Bearer 0123456789abcdef0124";
  absl::string_view no_prefix = "0123456789abcdef0123";
  EXPECT_TRUE(CheckBearerToken(&good, token).ok());
  EXPECT_EQ(CheckBearerToken(&wrong, token).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken(&no_prefix, token).code(), absl::StatusCode::kUnauthenticated);
  absl::Status missing = CheckBearerToken(nullptr, token);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("missing cluster token"));
}

TEST(AuthTokenTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthTokenTest, GeneratedTokensAreValidAndDistinct) {
  auto a = GenerateAuthToken();
  auto b = GenerateAuthToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_TRUE(ValidateAuthToken(*a).ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace cluster
}  // namespace psc
