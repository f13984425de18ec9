// Caffe's Embed, Tile and Reduction layers imported from prototxt text and run on the reference
// backend, against the values Caffe's definitions give (written out here), with poisoned
// buffers; and their malformed forms refused with a status naming the layer.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/caffe_net_runner.h"

namespace kiln {
namespace {

absl::StatusOr<CaffeModel> Import(const std::string& text) {
  return testing::ImportNetText(text, /*fill_seed=*/5);
}

// The net's one input "x" bound to `x` on the reference backend; every output by blob name.
std::map<std::string, std::vector<float>> RunNet(const CaffeModel& model,
                                                 const std::vector<float>& x) {
  auto out = testing::RunNet(model, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::map<std::string, std::vector<float>>();
}

std::string Net(const std::string& dims, const std::string& layer) {
  return absl::StrCat("layer { name: \"x\" type: \"Input\" top: \"x\" input_param { shape { ", dims,
                      " } } }\n", layer);
}

TEST(CaffeLookupLayersTest, EmbedTileAndReductionFollowCaffe) {
  // Embed with a constant table (0.5 everywhere) and bias 1: every output is 1.5 whatever the
  // index; then Tile the 2 features 3 times along axis 2; then Reduction ASUM over axis 1 of
  // the [2, 3, 6] result: 3 x 6 x 1.5 = 27 per row, times coeff 0.5.
  auto model = Import(Net("dim: 2 dim: 3",
                          R"pb(
                            layer {
                              name: "e"
                              type: "Embed"
                              bottom: "x"
                              top: "e"
                              embed_param {
                                num_output: 2
                                input_dim: 4
                                weight_filler { type: "constant" value: 0.5 }
                                bias_filler { type: "constant" value: 1 }
                              }
                            }
                            layer {
                              name: "t"
                              type: "Tile"
                              bottom: "e"
                              top: "t"
                              tile_param { axis: 2 tiles: 3 }
                            }
                            layer {
                              name: "r"
                              type: "Reduction"
                              bottom: "t"
                              top: "r"
                              reduction_param { operation: ASUM axis: 1 coeff: 0.5 }
                            }
                          )pb"));
  ASSERT_TRUE(model.ok()) << model.status();
  auto out = RunNet(*model, {0, 3, 1, 1, 2, 0});
  ASSERT_EQ(out["r"].size(), 2u);
  EXPECT_FLOAT_EQ(out["r"][0], 13.5f);
  EXPECT_FLOAT_EQ(out["r"][1], 13.5f);
  // MEAN over everything (axis 0, a scalar) and SUMSQ.
  auto mean = Import(Net("dim: 2 dim: 2",
                         R"pb(layer {
                                name: "m"
                                type: "Reduction"
                                bottom: "x"
                                top: "m"
                                reduction_param { operation: MEAN }
                              }
                              layer {
                                name: "q"
                                type: "Reduction"
                                bottom: "x"
                                top: "q"
                                reduction_param { operation: SUMSQ axis: 1 coeff: 2 }
                              })pb"));
  ASSERT_TRUE(mean.ok()) << mean.status();
  auto m = RunNet(*mean, {1, -2, 3, 6});
  ASSERT_EQ(m["m"].size(), 1u);
  EXPECT_FLOAT_EQ(m["m"][0], 2.0f);
  ASSERT_EQ(m["q"].size(), 2u);
  EXPECT_FLOAT_EQ(m["q"][0], 10.0f);  // 2 (1 + 4)
  EXPECT_FLOAT_EQ(m["q"][1], 90.0f);  // 2 (9 + 36)
}

TEST(CaffeLookupLayersTest, MalformedLayersAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layer { name: \"e\" type: \"Embed\" bottom: \"x\" top: \"e\" "
       "embed_param { num_output: 2 } }",
       "input_dim"},
      {"layer { name: \"e\" type: \"Embed\" bottom: \"x\" top: \"e\" "
       "embed_param { input_dim: 3 } }",
       "num_output"},
      {"layer { name: \"t\" type: \"Tile\" bottom: \"x\" top: \"t\" tile_param { axis: 1 } }",
       "tiles"},
      {"layer { name: \"t\" type: \"Tile\" bottom: \"x\" top: \"t\" tile_param { axis: 4 tiles: "
       "2 } }",
       "axis"},
      {"layer { name: \"r\" type: \"Reduction\" bottom: \"x\" top: \"r\" "
       "reduction_param { axis: 3 } }",
       "axis"},
  };
  for (const auto& [layer, word] : cases) {
    auto model = Import(Net("dim: 2 dim: 3", layer));
    ASSERT_FALSE(model.ok()) << layer;
    EXPECT_NE(model.status().message().find(word), std::string::npos) << model.status();
    EXPECT_NE(model.status().message().find("layer '"), std::string::npos) << model.status();
  }
}

}  // namespace
}  // namespace kiln
