// Caffe's LSTMUnit and ArgMax layers imported from prototxt text and run on the reference and
// CPU backends (poisoned buffers), against Caffe's equations and orders written out here: the
// gate blocks i, f, o, g of x, cont on the forget gate, ArgMax along an axis and over each item
// with out_max_val, ties to the higher index; and their malformed forms refused with a status
// naming the layer.
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

using Floats = std::vector<float>;

absl::StatusOr<CaffeModel> Import(const std::string& text) { return testing::ImportNetText(text); }

// Every input bound by its top name; every output by blob name.
std::map<std::string, Floats> RunNet(const CaffeModel& model, BackendChoice backend,
                                     const std::map<std::string, Floats>& values) {
  auto out = testing::RunNet(model, values, backend);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::map<std::string, Floats>();
}

std::string Input(const std::string& name, const std::string& dims) {
  return absl::StrCat("layer { name: \"", name, "\" type: \"Input\" top: \"", name,
                      "\" input_param { shape { ", dims, " } } }\n");
}

constexpr char kUnitNet[] = R"pb(
  layer {
    name: "unit"
    type: "LSTMUnit"
    bottom: "c_prev"
    bottom: "x"
    bottom: "cont"
    top: "c"
    top: "h"
  }
  layer { name: "split" type: "Split" bottom: "h" top: "h_out" top: "h_pick" }
  layer {
    name: "pick"
    type: "ArgMax"
    bottom: "h_pick"
    top: "pick"
    argmax_param { axis: 2 }
  }
  layer {
    name: "best"
    type: "ArgMax"
    bottom: "x"
    top: "best"
    argmax_param { top_k: 2 out_max_val: true }
  }
)pb";

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(CaffeSequenceUnitTest, LstmUnitAndArgMaxFollowCaffe) {
  auto model = Import(Input("c_prev", "dim: 1 dim: 2 dim: 2") + Input("x", "dim: 1 dim: 2 dim: 8") +
                      Input("cont", "dim: 1 dim: 2") + kUnitNet);
  ASSERT_TRUE(model.ok()) << model.status();
  // Two sequences, D = 2; the second restarts (cont 0). x's rows: i i f f o o g g.
  const Floats c_prev = {1, -1, 2, 0.5f};
  const Floats x = {0, 1, 2, -1, 0.5f, -0.5f, 1, -2, -1, 0.3f, 3, 3, 0, 1, 0.5f, 0.25f};
  const Floats cont = {1, 0};
  std::vector<double> c(4), h(4);
  for (int n = 0; n < 2; ++n) {
    for (int d = 0; d < 2; ++d) {
      const float* gates = x.data() + 8 * n;
      const double f = cont[n] * Sigmoid(gates[2 + d]);
      c[2 * n + d] = f * c_prev[2 * n + d] + Sigmoid(gates[d]) * std::tanh(double{gates[6 + d]});
      h[2 * n + d] = Sigmoid(gates[4 + d]) * std::tanh(c[2 * n + d]);
    }
  }
  // The restarted sequence's c is i g alone: sigmoid(-1) tanh(0.5) and sigmoid(0.3) tanh(0.25).
  EXPECT_NEAR(c[2], Sigmoid(-1) * std::tanh(0.5), 1e-12);
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    auto out = RunNet(*model, backend, {{"c_prev", c_prev}, {"x", x}, {"cont", cont}});
    ASSERT_EQ(out["c"].size(), 4u);
    ASSERT_EQ(out["h_out"].size(), 4u);
    for (int e = 0; e < 4; ++e) {
      EXPECT_NEAR(out["c"][e], c[e], 1e-6) << e;
      EXPECT_NEAR(out["h_out"][e], h[e], 1e-6) << e;
    }
    // ArgMax along axis 2 of h: the larger of each sequence's two units.
    ASSERT_EQ(out["pick"].size(), 2u);
    for (int n = 0; n < 2; ++n) {
      EXPECT_EQ(out["pick"][n], h[2 * n + 1] > h[2 * n] ? 1.0f : 0.0f) << n;
    }
    // Over the one item of x's 16 values: 3 twice (elements 10 and 11), the higher index first,
    // as Caffe's sort of (value, index) pairs gives; top [1, 2, 2]: indices, then values.
    EXPECT_EQ(out["best"], (Floats{11, 10, 3, 3}));
  }
}

TEST(CaffeSequenceUnitTest, MalformedLayersAreRefused) {
  const std::string inputs = Input("c_prev", "dim: 1 dim: 2 dim: 2") +
                             Input("x", "dim: 1 dim: 2 dim: 8") + Input("cont", "dim: 1 dim: 2") +
                             Input("x2", "dim: 2 dim: 2 dim: 8") +
                             Input("c2", "dim: 2 dim: 2 dim: 2") + Input("cont2", "dim: 2 dim: 2") +
                             Input("x6", "dim: 1 dim: 2 dim: 6");
  const std::string unit = "layer { name: \"u\" type: \"LSTMUnit\" ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layer { name: \"a\" type: \"ArgMax\" bottom: \"x\" top: \"a\" argmax_param { top_k: 0 } }",
       "top_k 0 must be in [1, 16]"},
      {"layer { name: \"a\" type: \"ArgMax\" bottom: \"x\" top: \"a\" "
       "argmax_param { top_k: 3 axis: 1 } }",
       "top_k 3 must be in [1, 2]"},
      {"layer { name: \"a\" type: \"ArgMax\" bottom: \"x\" top: \"a\" argmax_param { axis: 3 } }",
       "axis 3 is out of range"},
      {"layer { name: \"a\" type: \"ArgMax\" bottom: \"x\" bottom: \"cont\" top: \"a\" }",
       "takes 1 bottom(s), got 2"},
      {unit + "bottom: \"c_prev\" bottom: \"x\" top: \"c\" top: \"h\" }",
       "takes 3 bottom(s), got 2"},
      {unit + "bottom: \"c_prev\" bottom: \"x\" bottom: \"cont\" top: \"c\" }",
       "takes 2 top(s), got 1"},
      {unit + "bottom: \"c2\" bottom: \"x2\" bottom: \"cont2\" top: \"c\" top: \"h\" }",
       "axis 0 of size 1"},
      {unit + "bottom: \"c_prev\" bottom: \"x6\" bottom: \"cont\" top: \"c\" top: \"h\" }",
       "must have shape [1,2,8]"},
      {unit + "bottom: \"c_prev\" bottom: \"x\" bottom: \"c_prev\" top: \"c\" top: \"h\" }",
       "cont must have shape [1,2]"},
      {unit + "bottom: \"c_prev\" bottom: \"x\" bottom: \"cont\" top: \"c\" top: \"h\" "
              "argmax_param { top_k: 1 } }",
       "argmax_param"},
  };
  for (const auto& [layer, words] : cases) {
    auto model = Import(inputs + layer);
    ASSERT_FALSE(model.ok()) << layer;
    EXPECT_NE(model.status().message().find(words), std::string::npos) << model.status();
    EXPECT_NE(model.status().message().find("layer '"), std::string::npos) << model.status();
  }
}

}  // namespace
}  // namespace kiln
