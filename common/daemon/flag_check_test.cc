#include "common/daemon/flag_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace daemon {
namespace {

const std::vector<std::string> kKnown = {"batch_size",   "epochs", "check_job", "check_cluster",
                                         "data_channel", "logdir", "help",      "undefok"};

TEST(FlagCheckTest, KnownFlagsInEveryFormPass) {
  EXPECT_EQ(
      UnknownFlag({"--batch_size=3", "-epochs", "2", "--nodata_channel", "--logdir", "/x"}, kKnown),
      std::nullopt);
  // After "--" nothing is a flag of this program (the launcher's chief flags).
  EXPECT_EQ(UnknownFlag({"--epochs=1", "--", "--whatever"}, kKnown), std::nullopt);
  // Named by --undefok.
  EXPECT_EQ(UnknownFlag({"--undefok=eval_out,poll", "--eval_out=x"}, kKnown), std::nullopt);
  // Values and negative numbers given apart are no flags.
  EXPECT_EQ(UnknownFlag({"--epochs", "-5", "plain"}, kKnown), std::nullopt);
}

TEST(FlagCheckTest, AnUnknownFlagSuggestsTheNearest) {
  EXPECT_EQ(UnknownFlag({"--batch_sizee=3"}, kKnown),
            "unknown flag --batch_sizee; did you mean --batch_size?");
  EXPECT_EQ(UnknownFlag({"-epoch=3"}, kKnown), "unknown flag --epoch; did you mean --epochs?");
  EXPECT_EQ(UnknownFlag({"--check"}, kKnown), "unknown flag --check; did you mean --check_job?");
  EXPECT_EQ(UnknownFlag({"--epochs=1", "--frobnicate"}, kKnown), "unknown flag --frobnicate");
}

TEST(FlagCheckTest, HelpIsFoundBeforeADoubleDash) {
  EXPECT_EQ(HelpFlag({"--epochs=1", "--help"}), "help");
  EXPECT_EQ(HelpFlag({"-helpfull"}), "helpfull");
  EXPECT_EQ(HelpFlag({"--", "--help"}), std::nullopt);
  EXPECT_EQ(HelpFlag({"--helpful"}), std::nullopt);
}

}  // namespace
}  // namespace daemon
}  // namespace psc
