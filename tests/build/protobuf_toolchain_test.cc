// The protobuf toolchain works offline: generated code links against the static libprotobuf,
// binary and text formats round-trip, and malformed input is reported, not crashed on.
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/build/toolchain_probe.pb.h"

namespace kiln {
namespace {

TEST(ProtobufToolchainTest, BinaryAndTextRoundTrip) {
  testing::ToolchainProbe probe;
  probe.set_name("conv1");
  probe.add_values(0.5f);
  probe.add_values(-2.0f);
  probe.add_children()->set_size(7);
  EXPECT_EQ(probe.kind(), testing::ToolchainProbe::B);  // Declared default.
  std::string wire;
  ASSERT_TRUE(probe.SerializeToString(&wire));
  testing::ToolchainProbe back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.name(), "conv1");
  ASSERT_EQ(back.values_size(), 2);
  EXPECT_EQ(back.values(1), -2.0f);
  EXPECT_EQ(back.children(0).size(), 7);

  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(probe, &text));
  testing::ToolchainProbe from_text;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &from_text));
  EXPECT_EQ(from_text.SerializeAsString(), wire);
}

TEST(ProtobufToolchainTest, MalformedInputIsRejected) {
  testing::ToolchainProbe probe;
  EXPECT_FALSE(probe.ParseFromString(std::string("\x0a\x05\x61", 3)));  // Truncated string.
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(nullptr);
  EXPECT_FALSE(parser.ParseFromString("name: \"x\" bogus_field: 3", &probe));
}

}  // namespace
}  // namespace kiln
