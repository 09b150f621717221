#include "common/tfrecord/example.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace tfrecord {
namespace {

using ::testing::HasSubstr;

// An Example as tf.train.Example serializes it: each kind of feature parses
// back with its values, and the description names each in name order.
TEST(ExampleTest, ParsesAndDescribesEveryKind) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["label"].mutable_int64_list()->add_value(7);
  for (float v : {0.5f, -1.25f, 3.0f, 4.0f}) f["dense"].mutable_float_list()->add_value(v);
  f["image_raw"].mutable_bytes_list()->add_value(std::string(784, '\0'));
  f["png"].mutable_bytes_list()->add_value(std::string("\x89PNG\r\n\x1a\n....", 12));
  f["empty"];
  for (int64_t id : {3, 1, 4}) f["ids"].mutable_int64_list()->add_value(id);
  const std::string record = e.SerializeAsString();

  tfexample::Example got;
  ASSERT_TRUE(ParseExample(record, "f:0", &got).ok());
  const auto& g = got.features().feature();
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g.at("label").int64_list().value(0), 7);
  EXPECT_EQ(FeatureKind(g.at("dense")), std::string("float"));
  EXPECT_EQ(FeatureLength(g.at("dense")), 4);
  EXPECT_EQ(FeatureKind(g.at("empty")), std::string("empty"));
  EXPECT_EQ(g.at("image_raw").bytes_list().value(0).size(), 784u);

  EXPECT_EQ(DescribeExample(got, 3),
            "  dense      float[4]  0.5 -1.25 3 ...\n"
            "  empty      empty[0]  \n"
            "  ids        int64[3]  3 1 4\n"
            "  image_raw  bytes[1]  784 bytes\n"
            "  label      int64[1]  7\n"
            "  png        bytes[1]  12 bytes (PNG)\n");
}

// Bytes that are no Example are DATA_LOSS naming where they came from.
TEST(ExampleTest, NotAnExampleIsDataLoss) {
  tfexample::Example e;
  const absl::Status s = ParseExample(std::string("\x0a\xff\xff\xff\xff\x0f", 6),
                                      "x.tfrecord: record at offset 40", &e);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("x.tfrecord: record at offset 40"));
  EXPECT_TRUE(ParseExample("", "empty", &e).ok()) << "an empty record is an Example of no features";
}

}  // namespace
}  // namespace tfrecord
}  // namespace psc
