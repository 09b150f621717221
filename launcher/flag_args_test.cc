#include "launcher/flag_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

TEST(FlagArgsTest, LastFlagValueReadsEveryFormAndTheLastWins) {
  EXPECT_THAT(LastFlagValue({"--checkpoint_dir=/a"}, "checkpoint_dir"),
              Optional(std::string("/a")));
  EXPECT_THAT(LastFlagValue({"-checkpoint_dir=/b"}, "checkpoint_dir"), Optional(std::string("/b")));
  EXPECT_THAT(LastFlagValue({"--checkpoint_dir", "/c", "--epochs=2"}, "checkpoint_dir"),
              Optional(std::string("/c")));
  EXPECT_THAT(LastFlagValue({"--checkpoint_dir=/a", "--checkpoint_dir="}, "checkpoint_dir"),
              Optional(std::string("")));
  EXPECT_THAT(
      LastFlagValue({"--checkpoint_dir=/a", "--epochs=1", "--checkpoint_dir=/z"}, "checkpoint_dir"),
      Optional(std::string("/z")));
}

TEST(FlagArgsTest, LastFlagValueIgnoresOtherFlagsAndWhatFollowsADoubleDash) {
  EXPECT_EQ(LastFlagValue({}, "checkpoint_dir"), std::nullopt);
  EXPECT_EQ(LastFlagValue({"--checkpoint_dir_2=/a", "--checkpoint=/b", "checkpoint_dir=/c"},
                          "checkpoint_dir"),
            std::nullopt);
  EXPECT_EQ(LastFlagValue({"--", "--checkpoint_dir=/a"}, "checkpoint_dir"), std::nullopt);
  EXPECT_EQ(LastFlagValue({"--checkpoint_dir"}, "checkpoint_dir"), std::nullopt);
}

TEST(FlagArgsTest, WithoutFlagDropsEveryFormWithItsValue) {
  EXPECT_THAT(WithoutFlag({"--epochs=2", "--tf_config={}", "-tf_config=@f", "--tf_config", "{x}",
                           "--tf_config_2=k", "--model=mlp"},
                          "tf_config"),
              ElementsAre("--epochs=2", "--tf_config_2=k", "--model=mlp"));
  EXPECT_THAT(WithoutFlag({"--a", "--", "--tf_config={}"}, "tf_config"),
              ElementsAre("--a", "--", "--tf_config={}"));
  EXPECT_THAT(WithoutFlag({}, "tf_config"), ElementsAre());
}

}  // namespace
}  // namespace launcher
}  // namespace psc
