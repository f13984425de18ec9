// The CTCLoss layer (Kiln's extension of Caffe's format: ctc_loss_param, docs/CAFFE.md) imported
// from prototxt text and run on the reference backend with poisoned buffers, against losses
// counted by hand; its loss weight; and malformed layers refused with a status naming the layer.
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

absl::StatusOr<CaffeModel> Import(const std::string& text) { return testing::ImportNetText(text); }

// T = 3, N = 2, C = 3 scores, labels [2, 2], and the two lengths, then the layer under test.
std::string Net(const std::string& ctc_layer) {
  return absl::StrCat(R"pb(
                        layer {
                          name: "scores"
                          type: "Input"
                          top: "scores"
                          input_param { shape { dim: 3 dim: 2 dim: 3 } }
                        }
                        layer {
                          name: "labels"
                          type: "Input"
                          top: "labels"
                          input_param { shape { dim: 2 dim: 2 } }
                        }
                        layer {
                          name: "input_lengths"
                          type: "Input"
                          top: "input_lengths"
                          input_param { shape { dim: 2 } }
                        }
                        layer {
                          name: "label_lengths"
                          type: "Input"
                          top: "label_lengths"
                          input_param { shape { dim: 2 } }
                        }
                      )pb",
                      ctc_layer);
}

std::string CtcLayer(const std::string& param) {
  return absl::StrCat(
      "layer { name: \"loss\" type: \"CTCLoss\" bottom: \"scores\" bottom: \"labels\" "
      "bottom: \"input_lengths\" bottom: \"label_lengths\" top: \"loss\" ",
      param, " }");
}

// Runs the net with zero scores (every class 1/3 at every frame) and the given index inputs;
// the status of the run, and the loss.
absl::StatusOr<float> RunLoss(const CaffeModel& model, const std::vector<float>& labels,
                              const std::vector<float>& input_lengths,
                              const std::vector<float>& label_lengths) {
  auto out = testing::RunNet(model, {{"scores", std::vector<float>(18, 0.0f)},
                                     {"labels", labels},
                                     {"input_lengths", input_lengths},
                                     {"label_lengths", label_lengths}});
  if (!out.ok()) return out.status();
  return out->at("loss")[0];
}

// With uniform probabilities p(path) = 3^-3, so p(label) counts the paths that collapse to it.
// With blank 2: label [0] has 6 (b b 0, b 0 b, 0 b b, b 0 0, 0 0 b, 0 0 0) and [0, 1] has 5
// (0 1 1, 0 0 1, 0 1 b, b 0 1, 0 b 1) over 3 frames; [0, 0] has none over 2 frames.
const double kOne = std::log(27.0 / 6), kTwo = std::log(27.0 / 5);

TEST(CaffeCtcTest, ImportsAndMatchesCountedAlignments) {
  struct Case {
    std::string param;
    double expected;
  };
  const Case cases[] = {
      // Default reduction "mean": (kOne / 1 + kTwo / 2) / 2.
      {"ctc_loss_param { blank_index: 2 }", (kOne + kTwo / 2) / 2},
      {"ctc_loss_param { blank_index: 2 reduction: \"sum\" }", kOne + kTwo},
  };
  for (const Case& c : cases) {
    auto model = Import(Net(CtcLayer(c.param)));
    ASSERT_TRUE(model.ok()) << model.status();
    // A loss layer: its top carries loss weight 1, as Caffe's other losses.
    bool found = false;
    for (const CaffeLayer& layer : model->layers) {
      if (layer.name != "loss") continue;
      found = true;
      ASSERT_EQ(layer.tops.size(), 1u);
      EXPECT_EQ(layer.tops[0].loss_weight, 1.0f);
      ASSERT_EQ(layer.nodes.size(), 1u);
      const Node* node = model->graph->FindNode(layer.nodes[0]);
      ASSERT_NE(node, nullptr);
      EXPECT_EQ(node->kind(), OpKind::kCTCLoss);
      EXPECT_EQ(node->GetInt("blank"), 2);
    }
    EXPECT_TRUE(found);
    // Sample 0's padding (7) is past its length and never read.
    auto loss = RunLoss(*model, {0, 7, 0, 1}, {3, 3}, {1, 2});
    ASSERT_TRUE(loss.ok()) << c.param << ": " << loss.status();
    EXPECT_NEAR(*loss, c.expected, 1e-5) << c.param;
  }
  // zero_infinity: sample 1's [0, 0] cannot fit in 2 frames; its infinite loss becomes 0.
  auto model =
      Import(Net(CtcLayer("loss_weight: 0.5 ctc_loss_param { blank_index: 2 reduction: \"sum\" "
                          "zero_infinity: true }")));
  ASSERT_TRUE(model.ok()) << model.status();
  auto loss = RunLoss(*model, {0, 0, 0, 0}, {3, 2}, {1, 2});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, kOne, 1e-5);
  for (const CaffeLayer& layer : model->layers) {
    if (layer.name == "loss") {
      EXPECT_EQ(layer.tops[0].loss_weight, 0.5f);
    }
  }
}

TEST(CaffeCtcTest, BadIndicesFailTheRunNamingTheLayerAndElement) {
  auto model = Import(Net(CtcLayer("")));  // blank 0
  ASSERT_TRUE(model.ok()) << model.status();
  auto loss = RunLoss(*model, {1, 0, 0, 2}, {3, 3}, {1, 2});  // labels[1, 0] is the blank
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loss.status().message().find("'loss'"), std::string::npos) << loss.status();
  EXPECT_NE(loss.status().message().find("labels[1, 0] = 0 is the blank"), std::string::npos)
      << loss.status();
  loss = RunLoss(*model, {1, 0, 1, 2}, {3, 4}, {1, 2});  // 4 frames of 3
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(loss.status().message().find("input_lengths[1] = 4"), std::string::npos)
      << loss.status();
}

TEST(CaffeCtcTest, MalformedLayersAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The forks' layout (scores, Caffe's sequence indicators, -1 padded targets).
      {"layer { name: \"loss\" type: \"CTCLoss\" bottom: \"scores\" bottom: \"input_lengths\" "
       "bottom: \"labels\" top: \"loss\" }",
       "needs 4 bottoms"},
      {CtcLayer("ctc_loss_param { reduction: \"none\" }"), "ctc_loss_param.reduction"},
      {CtcLayer("ctc_loss_param { blank_index: 3 }"), "blank 3 is outside [0, 3)"},
      {CtcLayer("loss_param { normalization: FULL }"), "loss_param"},
      {"layer { name: \"r\" type: \"ReLU\" bottom: \"scores\" top: \"r\" "
       "ctc_loss_param { blank_index: 1 } }",
       "ctc_loss_param"},
  };
  for (const auto& [layer, word] : cases) {
    auto model = Import(Net(layer));
    ASSERT_FALSE(model.ok()) << layer;
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
    EXPECT_NE(model.status().message().find(word), std::string::npos) << model.status();
    EXPECT_NE(model.status().message().find("layer '"), std::string::npos) << model.status();
  }
}

}  // namespace
}  // namespace kiln
