// The precision/layout rewrite: where Convert nodes go, which weights change dtype and order,
// that nothing changes when nothing is asked, and that the rewritten graph computes the same
// function (reference backend, which runs any dtype and strides).
#include "passes/precision_layout.h"

#include <cmath>

#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

// x -> conv(+bias) -> BatchNorm -> Scale -> ReLU -> pool -> InnerProduct -> Softmax, with the
// labels of an Accuracy beside it: every kind of port the rewrite treats differently.
std::unique_ptr<Graph> SmallNet() {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 3, 9, 9}));
  Value labels = *b.Input("label", F32({2}));
  Value w = *b.Constant("conv/w", RandomTensor(F32({4, 3, 3, 3}), 1));
  Value bias = *b.Constant("conv/b", RandomTensor(F32({4}), 2));
  Value conv = (*b.Op("Convolution", {x, w, bias}, {{"pad", std::vector<int64_t>{1}}}, "conv"))[0];
  Value mean = *b.Constant("bn/mean", RandomTensor(F32({4}), 3));
  Value var = *b.Constant("bn/var", RandomTensor(F32({4}), 4, 0.5f, 2.0f));
  Value bn = (*b.Op("BatchNorm", {conv, mean, var}, {}, "bn"))[0];
  Value s = *b.Constant("scale/s", RandomTensor(F32({4}), 5));
  Value sb = *b.Constant("scale/b", RandomTensor(F32({4}), 6));
  Value scaled = (*b.Op("Scale", {bn, s, sb}, {}, "scale"))[0];
  Value relu = *b.Relu(scaled, 0.0, "relu");
  Value pool = (*b.Op("Pooling", {relu},
                      {{"kernel", std::vector<int64_t>{3}}, {"stride", std::vector<int64_t>{2}}},
                      "pool"))[0];
  Value ip_w = *b.Constant("ip/w", RandomTensor(F32({5, 64}), 7));
  Value ip = (*b.Op("InnerProduct", {pool, ip_w}, {}, "ip"))[0];
  Value prob = (*b.Op("Softmax", {ip}, {}, "prob"))[0];
  Value accuracy = (*b.Op("Accuracy", {ip, labels}, {}, "accuracy"))[0];
  EXPECT_TRUE(b.Output("prob", prob).ok());
  EXPECT_TRUE(b.Output("accuracy", accuracy).ok());
  return b.Finish();
}

const Node* Find(const Graph& g, const std::string& name) {
  const Node* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << name;
  return n;
}

TEST(PrecisionLayoutTest, SixteenBitChannelsLastPlan) {
  auto graph = SmallNet();
  auto rewritten = ApplyPrecisionAndLayout(*graph, {DataType::kF16, /*channels_last=*/true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  const Graph& g = **rewritten;
  // The image is converted once at the edge; the labels are left alone.
  const Node* to_plan = Find(g, "data/to_f16_nhwc");
  ASSERT_NE(to_plan, nullptr);
  EXPECT_EQ(to_plan->op(), "Convert");
  EXPECT_EQ(to_plan->output_types()[0].dtype(), DataType::kF16);
  EXPECT_TRUE(to_plan->output_types()[0].IsChannelsLast());
  EXPECT_EQ(Find(g, "accuracy")->input(1).node->op(), "Parameter");
  // Data weights are f16 (the filter KRSC beside NHWC data); BatchNorm and Scale parameters f32.
  const Node* conv = Find(g, "conv");
  EXPECT_EQ(conv->input(1).type().dtype(), DataType::kF16);
  EXPECT_TRUE(conv->input(1).type().IsChannelsLast());
  EXPECT_EQ(conv->input(2).type().dtype(), DataType::kF16);
  EXPECT_EQ(conv->output_types()[0].dtype(), DataType::kF16);
  EXPECT_TRUE(conv->output_types()[0].IsChannelsLast());
  EXPECT_EQ(Find(g, "bn")->input(1).type().dtype(), DataType::kF32);
  EXPECT_EQ(Find(g, "scale")->input(2).type().dtype(), DataType::kF32);
  EXPECT_EQ(Find(g, "ip")->input(1).type().dtype(), DataType::kF16);
  // Outputs come back in the unrewritten graph's types.
  for (const GraphOutput& o : g.outputs()) {
    const GraphOutput* original = nullptr;
    for (const GraphOutput& p : graph->outputs())
      if (p.name == o.name) original = &p;
    ASSERT_NE(original, nullptr);
    EXPECT_EQ(o.value.type(), original->value.type()) << o.name;
  }
}

// A node that stands for fused layers keeps them through the rewrite (kiln time and compile
// report by them).
TEST(PrecisionLayoutTest, KeepsWhatFusedNodesStandFor) {
  auto graph = SmallNet();
  graph->SetOrigins(graph->FindNode("conv"), {"conv", "bn", "scale", "relu"});
  auto rewritten = ApplyPrecisionAndLayout(*graph, {DataType::kF16, true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ((*rewritten)->FindNode("conv")->origins(),
            (std::vector<std::string>{"conv", "bn", "scale", "relu"}));
}

TEST(PrecisionLayoutTest, NothingAskedNothingChanged) {
  auto graph = SmallNet();
  auto rewritten = ApplyPrecisionAndLayout(*graph, {DataType::kF32, false});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(PrintGraph(**rewritten), PrintGraph(*graph));
}

TEST(PrecisionLayoutTest, RejectsANonFloatPrecision) {
  auto graph = SmallNet();
  EXPECT_EQ(ApplyPrecisionAndLayout(*graph, {DataType::kI32, false}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The rewritten graphs compute the same outputs on the reference backend: exactly up to f32
// rounding for the NHWC f32 plan, within 16-bit rounding for f16 and bf16.
TEST(PrecisionLayoutTest, RewrittenGraphsComputeTheSameFunction) {
  auto graph = SmallNet();
  std::map<std::string, HostTensor> inputs = {{"data", RandomTensor(F32({2, 3, 9, 9}), 9)}};
  HostTensor labels(F32({2}));
  labels.SetFloat(0, 1);
  labels.SetFloat(1, 3);
  inputs["label"] = labels;
  auto run = [&](const Graph& g) {
    CompileOptions options;
    options.backend = BackendChoice::kReference;
    auto plan = Compile(g, DefaultKernelRegistry(), options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    auto ctx = ExecutionContext::Create(**plan);
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    auto out = (*ctx)->Run(inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  };
  const auto expected = run(*graph);
  const struct {
    PlanTypes types;
    double tolerance;
  } cases[] = {{{DataType::kF32, true}, 1e-6},
               {{DataType::kF16, true}, 2e-2},
               {{DataType::kBF16, false}, 8e-2}};
  for (const auto& c : cases) {
    auto rewritten = ApplyPrecisionAndLayout(*graph, c.types);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status();
    const auto actual = run(**rewritten);
    for (const auto& [name, want] : expected) {
      const HostTensor& got = actual.at(name);
      ASSERT_EQ(got.type(), want.type()) << name;
      for (int64_t i = 0; i < want.type().num_elements(); ++i) {
        EXPECT_NEAR(got.GetFloat(i), want.GetFloat(i), c.tolerance)
            << name << "[" << i << "] " << DataTypeName(c.types.dtype);
      }
    }
  }
}

}  // namespace
}  // namespace kiln
