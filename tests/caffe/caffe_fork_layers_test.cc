// Layers of Caffe's forks that public nets are built on (ShuffleNet's): ShuffleChannel against
// its definition written out by hand, ConvolutionDepthwise against a Convolution with one group
// per channel and the same weights, and their malformed forms refused with a status naming the
// layer.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/caffe_net_runner.h"

namespace kiln {
namespace {

using testing::ImportNetText;
using testing::RunNet;

std::string Net(const std::string& dims, const std::string& layer) {
  return absl::StrCat("layer { name: \"x\" type: \"Input\" top: \"x\" input_param { shape { ", dims,
                      " } } }\n", layer);
}

TEST(CaffeForkLayersTest, ShuffleChannelInterleavesTheGroups) {
  // 6 channels in 3 groups of 2 (a, b): y takes channel 0 of each group, then channel 1.
  auto model = ImportNetText(Net("dim: 1 dim: 6 dim: 1 dim: 2",
                                 R"(layer { name: "s" type: "ShuffleChannel" bottom: "x" top: "y"
                                            shuffle_channel_param { group: 3 } })"));
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> x;
  for (int c = 0; c < 6; ++c) x.insert(x.end(), {10.0f * c, 10.0f * c + 1});
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    auto out = RunNet(*model, {{"x", x}}, backend);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at("y"), (std::vector<float>{0, 1, 20, 21, 40, 41, 10, 11, 30, 31, 50, 51}));
  }
}

TEST(CaffeForkLayersTest, ConvolutionDepthwiseIsAConvolutionWithAGroupPerChannel) {
  const std::string param = R"(convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2
                               weight_filler { type: "gaussian" std: 0.5 }
                               bias_filler { type: "constant" value: 0.25 } })";
  auto depthwise = ImportNetText(Net("dim: 2 dim: 4 dim: 5 dim: 5",
                                     absl::StrCat(R"(layer { name: "dw" type: "ConvolutionDepthwise"
                                                  bottom: "x" top: "y" )",
                                                  param, "}")));
  auto grouped = ImportNetText(
      Net("dim: 2 dim: 4 dim: 5 dim: 5",
          absl::StrCat(R"(layer { name: "dw" type: "Convolution" bottom: "x" top: "y" )",
                       absl::StrCat(param.substr(0, param.size() - 1), " group: 4 }"), "}")));
  ASSERT_TRUE(depthwise.ok()) << depthwise.status();
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  ASSERT_EQ(depthwise->params.size(), 2u);
  EXPECT_EQ(depthwise->params[0].shape, (std::vector<int64_t>{4, 1, 3, 3}));
  std::vector<float> x(2 * 4 * 5 * 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) / 5.0f - 1.0f;
  auto a = RunNet(*depthwise, {{"x", x}}), b = RunNet(*grouped, {{"x", x}});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->at("y").size(), 2u * 4 * 3 * 3);
  EXPECT_EQ(a->at("y"), b->at("y"));
}

TEST(CaffeForkLayersTest, MalformedLayersAreRefusedNamingThem) {
  const struct {
    std::string layer, expect;
  } cases[] = {
      {R"(layer { name: "bad_shuffle" type: "ShuffleChannel" bottom: "x" top: "y"
                  shuffle_channel_param { group: 4 } })",
       "bad_shuffle"},
      {R"(layer { name: "bad_dw" type: "ConvolutionDepthwise" bottom: "x" top: "y"
                  convolution_param { num_output: 6 kernel_size: 3 group: 2 } })",
       "bad_dw"},
      {R"(layer { name: "odd_dw" type: "ConvolutionDepthwise" bottom: "x" top: "y"
                  convolution_param { num_output: 5 kernel_size: 3 } })",
       "odd_dw"},
  };
  for (const auto& c : cases) {
    auto model = ImportNetText(Net("dim: 1 dim: 6 dim: 4 dim: 4", c.layer));
    ASSERT_FALSE(model.ok()) << c.expect;
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
    EXPECT_NE(model.status().message().find(c.expect), std::string::npos) << model.status();
  }
}

}  // namespace
}  // namespace kiln
