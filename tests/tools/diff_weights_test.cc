// `kiln diff-weights`: the differences it reports, its tolerance (exit 0 within, 1 over) and its
// errors for nets that do not match.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "frontends/caffe/caffe_io.h"
#include "tests/util/scratch_file.h"
#include "tools/diff_weights_command.h"

namespace kiln {
namespace {

caffe::NetParameter Net(std::vector<float> conv, std::vector<float> bias) {
  caffe::NetParameter n;
  caffe::LayerParameter* l = n.add_layer();
  l->set_name("conv");
  caffe::BlobProto* w = l->add_blobs();
  for (float v : conv) w->add_data(v);
  caffe::BlobProto* b = l->add_blobs();
  for (float v : bias) b->add_data(v);
  n.add_layer()->set_name("relu");  // no blobs: ignored
  return n;
}

TEST(DiffWeightsTest, ReportsTheLargestDifferences) {
  absl::StatusOr<WeightsDiff> d = DiffWeights(Net({1, 2, 3}, {0.5}), Net({1, 2.5, 3}, {0.5}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->blobs, 2);
  EXPECT_EQ(d->elements, 4);
  EXPECT_DOUBLE_EQ(d->max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d->max_rel, 0.2);          // 0.5 / 2.5
  EXPECT_DOUBLE_EQ(d->max_mixed, 0.5 / 3.5);  // 0.5 / (1 + 2.5)
  EXPECT_EQ(d->worst, "conv/0");
  d = DiffWeights(Net({1, 2, 3}, {0.5}), Net({1, 2, 3}, {0.5}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->max_abs, 0);
}

TEST(DiffWeightsTest, MismatchedNetsAreErrors) {
  EXPECT_FALSE(DiffWeights(Net({1, 2, 3}, {0.5}), Net({1, 2}, {0.5})).ok());
  caffe::NetParameter other = Net({1, 2, 3}, {0.5});
  other.mutable_layer(0)->set_name("conv2");
  absl::StatusOr<WeightsDiff> d = DiffWeights(Net({1, 2, 3}, {0.5}), other);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(d.status().message()).find("'conv"), std::string::npos);
  EXPECT_FALSE(DiffWeights(caffe::NetParameter(), other).ok());
}

int Command(std::vector<std::string> args) {
  args.insert(args.begin(), {"kiln", "diff-weights"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return DiffWeightsCommand(static_cast<int>(argv.size()), argv.data());
}

TEST(DiffWeightsTest, CommandExitsByTolerance) {
  const std::string a = ScratchFile("diff_a.caffemodel"), b = ScratchFile("diff_b.caffemodel");
  ASSERT_TRUE(WriteFileBytes(a, Net({1, 2, 3}, {0.5}).SerializeAsString()).ok());
  ASSERT_TRUE(WriteFileBytes(b, Net({1, 2, 3.00001f}, {0.5}).SerializeAsString()).ok());
  EXPECT_EQ(Command({"--weights", a, "--against", b, "--tolerance", "1e-5"}), 0);
  EXPECT_EQ(Command({"--weights", a, "--against", b, "--tolerance", "1e-7"}), 1);
  EXPECT_EQ(Command({"--weights", a, "--against", b}), 0);
  EXPECT_EQ(Command({"--weights", a}), 2);
  EXPECT_EQ(Command({"--weights", a, "--against", b, "--tolerance", "x"}), 2);
  EXPECT_EQ(Command({"--weights", a, "--against", ScratchFile("no_such.caffemodel")}), 1);
}

}  // namespace
}  // namespace kiln
