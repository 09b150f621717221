#include "common/base/incarnation.h"

#include <set>

#include "gtest/gtest.h"

namespace psc {
namespace base {
namespace {

TEST(IncarnationTest, IsNonZeroAndDiffersFromCallToCall) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) {
    const uint64_t x = NewIncarnation();
    EXPECT_NE(x, 0u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 64u) << "64 random 64-bit numbers collide with probability ~1e-16";
}

}  // namespace
}  // namespace base
}  // namespace psc
