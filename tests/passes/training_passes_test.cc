// The training rewrites: fuse_batchnorm_scale's, fuse_affine_batchnorm_relu's, fuse_eltwise_relu's
// and fuse_gradient_sum_activation's structure on the text dump, the cases they decline (identical
// dump, or the ReLU kept, with the reason recorded), and numerics: the fused graph's forward
// outputs, running statistics and gradients equal the unfused graph's on the reference backend.
#include "passes/training_passes.h"

#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/op_test_util.h"
#include "training/backward.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

using Outputs = std::map<std::string, HostTensor>;

struct Options {
  bool bias = true;            // the Scale has a bias
  bool global_stats = false;   // the BatchNorm uses stored statistics
  bool second_reader = false;  // the BatchNorm output is also a graph output
  bool update_stats = true;    // the BatchNorm outputs its running statistics
  double relu_slope = 0;       // the ReLU after the Scale
  bool scaled_output = false;  // the Scale's output (the ReLU's input) is also a graph output
  bool relu_output = false;    // the ReLU's output is also a graph output
};

// data -> conv -> BatchNorm -> Scale -> ReLU -> Σ against a weight "w": a scalar "loss", the
// running statistics as outputs "stats/*", parameters as inputs.
std::unique_ptr<Graph> Net(const Options& o) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({3, 4, 5, 5}));
  Value w = *b.Input("conv/w", F32({6, 4, 3, 3}));
  Value conv = *b.Op1("Convolution", {x, w}, {{"pad", std::vector<int64_t>{1}}}, "conv");
  Value mean = *b.Input("bn/mean", F32({6}));
  Value var = *b.Input("bn/var", F32({6}));
  Value factor = *b.Input("bn/factor", F32({1}));
  std::vector<Value> bn =
      *b.Op("BatchNorm", {conv, mean, var, factor},
            {{"use_global_stats", o.global_stats}, {"update_running_stats", o.update_stats}}, "bn");
  std::vector<Value> scale_in = {bn[0], *b.Input("scale/s", F32({6}))};
  if (o.bias) scale_in.push_back(*b.Input("scale/b", F32({6})));
  Value scaled = *b.Op1("Scale", scale_in, {}, "scale");
  Value relu = *b.Relu(scaled, o.relu_slope, "relu");
  Value loss = *b.Op1("EuclideanLoss", {relu, *b.Input("target", F32({3, 6, 5, 5}))}, {}, "loss");
  EXPECT_TRUE(b.Output("loss", loss).ok());
  if (o.update_stats) {
    for (int i = 1; i < 4; ++i) EXPECT_TRUE(b.Output("stats/" + std::to_string(i), bn[i]).ok());
  }
  if (o.second_reader) {
    EXPECT_TRUE(b.Output("normalized", bn[0]).ok());
  }
  if (o.scaled_output) {
    EXPECT_TRUE(b.Output("scaled", scaled).ok());
  }
  if (o.relu_output) {
    EXPECT_TRUE(b.Output("activated", relu).ok());
  }
  return b.Finish();
}

Outputs Inputs() {
  Outputs in;
  in["data"] = RandomTensor(F32({3, 4, 5, 5}), 1);
  in["conv/w"] = RandomTensor(F32({6, 4, 3, 3}), 2, -0.3f, 0.3f);
  in["bn/mean"] = RandomTensor(F32({6}), 3);
  in["bn/var"] = RandomTensor(F32({6}), 4, 0.5f, 2.0f);
  in["bn/factor"] = RandomTensor(F32({1}), 5, 1.0f, 2.0f);
  in["scale/s"] = RandomTensor(F32({6}), 6, 0.5f, 1.5f);
  in["scale/b"] = RandomTensor(F32({6}), 7);
  in["target"] = RandomTensor(F32({3, 6, 5, 5}), 8);
  return in;
}

// Adds the loss's backward with gradient outputs "grad/<input>" for the parameters and data.
void AddBackward(Graph& g) {
  std::vector<Value> wrt;
  std::vector<std::string> names;
  for (Node* p : g.Parameters()) {
    if (p->name() == "target" || p->name().rfind("bn/", 0) == 0) continue;
    wrt.push_back(p->output(0));
    names.push_back(p->name());
  }
  Value loss;
  for (const GraphOutput& o : g.outputs()) {
    if (o.name == "loss") loss = o.value;
  }
  auto grads = BuildBackward(g, {{loss, 1.0}}, wrt, {});
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (size_t i = 0; i < grads->size(); ++i) {
    ASSERT_TRUE(g.AddOutput("grad/" + names[i], (*grads)[i]).ok());
  }
}

Outputs RunReference(const Graph& g, const Outputs& inputs) {
  CompileOptions options;
  options.backend = BackendChoice::kReference;
  auto plan = Compile(g, DefaultKernelRegistry(), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  auto ctx = ExecutionContext::Create(**plan);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  Outputs bound;
  for (const Node* p : g.Parameters()) bound[p->name()] = inputs.at(p->name());
  auto out = (*ctx)->Run(bound);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Outputs{};
}

absl::StatusOr<bool> Fuse(Graph& g, std::vector<PassRemark>* remarks = nullptr) {
  PassContext context;
  context.inference = false;
  context.remarks = remarks;
  return MakeTrainingForwardPipeline().Run(g, context);
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op ? 1 : 0;
  return n;
}

TEST(FuseBatchNormScaleTest, TrainingPairBecomesOneAffineBatchNorm) {
  auto g = Net({});
  auto changed = Fuse(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const std::string dump = PrintGraph(*g);
  EXPECT_EQ(CountOps(*g, "AffineBatchNorm"), 1) << dump;
  EXPECT_EQ(CountOps(*g, "BatchNorm"), 0) << dump;
  EXPECT_EQ(CountOps(*g, "Scale"), 0) << dump;
  // It keeps the BatchNorm's name, reads the Scale's parameters, and reports both layers.
  const Node* fused = g->FindNode("bn");
  ASSERT_NE(fused, nullptr) << dump;
  EXPECT_EQ(fused->op(), "AffineBatchNorm");
  EXPECT_EQ(fused->input(4).node->name(), "scale/s");
  EXPECT_EQ(fused->input(5).node->name(), "scale/b");
  // The plain ReLU after the pair is folded in as well.
  EXPECT_TRUE(fused->GetBool("relu")) << dump;
  EXPECT_EQ(CountOps(*g, "ReLU"), 0) << dump;
  EXPECT_EQ(fused->origins(), (std::vector<std::string>{"bn", "scale", "relu"}));
  // The statistics outputs now come from the fused node.
  for (const GraphOutput& o : g->outputs()) {
    if (o.name.rfind("stats/", 0) == 0) {
      EXPECT_EQ(o.value.node, fused) << o.name;
    }
  }
}

TEST(FuseBatchNormScaleTest, DeclinedCasesLeaveTheGraphAsItWas) {
  for (const auto& [what, options] : std::vector<std::pair<std::string, Options>>{
           {"no bias", Options{false, false, false, true}},
           {"stored statistics", Options{true, true, false, false}},
           {"second reader", Options{true, false, true, true}}}) {
    auto g = Net(options);
    const std::string before = PrintGraph(*g);
    std::vector<PassRemark> remarks;
    auto changed = Fuse(*g, &remarks);
    ASSERT_TRUE(changed.ok()) << what << ": " << changed.status();
    EXPECT_FALSE(*changed) << what;
    EXPECT_EQ(PrintGraph(*g), before) << what;
    if (what != "stored statistics") {
      ASSERT_EQ(remarks.size(), 1u) << what;
      EXPECT_EQ(remarks[0].pass, "fuse_batchnorm_scale");
      EXPECT_FALSE(remarks[0].reason.empty());
    }
  }
}

// A leaky ReLU, or an AffineBatchNorm output read by something besides the ReLU, keeps the
// ReLU apart (the pair is still fused); the reason is recorded.
TEST(FuseAffineBatchNormReluTest, DeclinedCasesKeepTheRelu) {
  for (const auto& [what, options] : std::vector<std::pair<std::string, Options>>{
           {"leaky", Options{true, false, false, true, 0.1, false, false}},
           {"scale output read", Options{true, false, false, true, 0.0, true, false}}}) {
    auto g = Net(options);
    std::vector<PassRemark> remarks;
    auto changed = Fuse(*g, &remarks);
    ASSERT_TRUE(changed.ok()) << what << ": " << changed.status();
    const std::string dump = PrintGraph(*g);
    EXPECT_EQ(CountOps(*g, "AffineBatchNorm"), 1) << what << "\n" << dump;
    EXPECT_EQ(CountOps(*g, "ReLU"), 1) << what << "\n" << dump;
    EXPECT_FALSE(g->FindNode("bn")->GetBool("relu")) << what;
    int relu_remarks = 0;
    for (const PassRemark& r : remarks) {
      if (r.pass != "fuse_affine_batchnorm_relu") continue;
      ++relu_remarks;
      EXPECT_FALSE(r.reason.empty()) << what;
    }
    EXPECT_EQ(relu_remarks, 1) << what;
  }
}

// Disabled by name (the CLI's --disable-pass), the ReLU stays a ReLU and the pair is still fused.
TEST(FuseAffineBatchNormReluTest, DisabledByNameKeepsTheRelu) {
  auto g = Net({});
  PassManagerOptions options;
  options.disabled = {"fuse_affine_batchnorm_relu"};
  PassContext context;
  context.inference = false;
  ASSERT_TRUE(MakeTrainingForwardPipeline(options).Run(*g, context).ok());
  EXPECT_EQ(CountOps(*g, "AffineBatchNorm"), 1);
  EXPECT_EQ(CountOps(*g, "ReLU"), 1);
}

// The ReLU's output may have other readers: they read the fused output.
TEST(FuseAffineBatchNormReluTest, ReluOutputWithOtherReadersIsFused) {
  Options options;
  options.relu_output = true;
  auto g = Net(options);
  ASSERT_TRUE(Fuse(*g).ok());
  EXPECT_EQ(CountOps(*g, "ReLU"), 0) << PrintGraph(*g);
  for (const GraphOutput& o : g->outputs()) {
    if (o.name == "activated") {
      EXPECT_EQ(o.value, g->FindNode("bn")->output(0));
    }
  }
}

// Forward outputs, running statistics and every gradient (data, filter, scale, bias) of the
// fused graph (BatchNorm + Scale + ReLU as one AffineBatchNorm, or only the pair when the ReLU is
// leaky) against the unfused one.
void ExpectFusedTrainsLikeUnfused(const Options& options) {
  auto unfused = Net(options);
  auto fused = Net(options);
  ASSERT_TRUE(Fuse(*fused).ok());
  ASSERT_EQ(CountOps(*fused, "AffineBatchNorm"), 1);
  EXPECT_EQ(CountOps(*fused, "ReLU"), options.relu_slope == 0 ? 0 : 1);
  AddBackward(*unfused);
  AddBackward(*fused);
  ASSERT_EQ(CountOps(*fused, "AffineBatchNormGradient"), 1) << PrintGraph(*fused);
  EXPECT_EQ(CountOps(*fused, "ScaleParamGradient"), 0);
  // The backward reads the batch statistics the forward saved (its last two outputs).
  for (const Node* n : fused->nodes()) {
    if (n->kind() != OpKind::kAffineBatchNormGradient) continue;
    const Node* forward = fused->FindNode("bn");
    ASSERT_NE(forward, nullptr);
    EXPECT_EQ(n->input(3), (Value{const_cast<Node*>(forward), forward->num_outputs() - 2}));
    EXPECT_EQ(n->input(4), (Value{const_cast<Node*>(forward), forward->num_outputs() - 1}));
    // With the ReLU folded in, its mask is read from the fused output.
    const bool relu = options.relu_slope == 0;
    EXPECT_EQ(n->GetBool("relu"), relu);
    ASSERT_EQ(n->num_inputs(), relu ? 6 : 5);
    if (relu) {
      EXPECT_EQ(n->input(5), (Value{const_cast<Node*>(forward), 0}));
    }
  }
  const Outputs in = Inputs();
  const Outputs want = RunReference(*unfused, in);
  const Outputs got = RunReference(*fused, in);
  ASSERT_FALSE(want.empty());
  std::vector<std::string> names = {"loss",      "stats/1",     "stats/2",      "stats/3",
                                    "grad/data", "grad/conv/w", "grad/scale/s", "grad/scale/b"};
  if (options.relu_output) names.push_back("activated");
  for (const std::string& name : names) {
    ASSERT_TRUE(got.count(name) && want.count(name)) << name;
    const HostTensor& a = got.at(name);
    const HostTensor& b = want.at(name);
    ASSERT_EQ(a.type().num_elements(), b.type().num_elements()) << name;
    double num = 0, den = 0;
    for (int64_t i = 0; i < a.type().num_elements(); ++i) {
      const double d = a.GetFloat(i) - b.GetFloat(i);
      num += d * d;
      den += double{b.GetFloat(i)} * b.GetFloat(i);
    }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-5) << name;
    EXPECT_GT(den, 0) << name;  // nothing compared against all zeros
  }
}

TEST(FuseBatchNormScaleTest, FusedGraphTrainsLikeTheCaffePair) { ExpectFusedTrainsLikeUnfused({}); }

TEST(FuseBatchNormScaleTest, FusedGraphWithReluReadElsewhereTrainsLikeTheCaffeLayers) {
  Options options;
  options.relu_output = true;
  ExpectFusedTrainsLikeUnfused(options);
}

TEST(FuseBatchNormScaleTest, FusedPairBeforeALeakyReluTrainsLikeTheCaffeLayers) {
  Options options;
  options.relu_slope = 0.1;
  ExpectFusedTrainsLikeUnfused(options);
}

// ---- fuse_eltwise_relu and fuse_gradient_sum_activation on a two-block residual net ----

struct ResidualOptions {
  double slope = 0;         // both ReLUs' negative slope
  bool sum_output = false;  // the first sum (the first ReLU's input) is also a graph output
};

// data -> conv a -> A; conv b(A) -> B; res = A + B -> ReLU -> R; conv c(R) -> C;
// res2 = R + C -> ReLU -> Euclidean loss. R has two readers (conv c and res2), so its gradient
// is a sum.
std::unique_ptr<Graph> ResidualNet(const ResidualOptions& o) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 5, 5}));
  auto conv = [&](Value in, const std::string& name) {
    Value w = *b.Input(name + "/w", F32({4, 4, 3, 3}));
    return *b.Op1("Convolution", {in, w}, {{"pad", std::vector<int64_t>{1}}}, name);
  };
  Value a = conv(x, "a");
  Value bb = conv(a, "b");
  Value res = *b.Op1("Eltwise", {a, bb}, {}, "res");
  Value r = *b.Relu(res, o.slope, "res_relu");
  Value c = conv(r, "c");
  Value res2 = *b.Op1("Eltwise", {r, c}, {}, "res2");
  Value r2 = *b.Relu(res2, o.slope, "res2_relu");
  Value loss = *b.Op1("EuclideanLoss", {r2, *b.Input("target", F32({2, 4, 5, 5}))}, {}, "loss");
  EXPECT_TRUE(b.Output("loss", loss).ok());
  if (o.sum_output) {
    EXPECT_TRUE(b.Output("sum", res).ok());
  }
  return b.Finish();
}

Outputs ResidualInputs() {
  Outputs in;
  in["data"] = RandomTensor(F32({2, 4, 5, 5}), 11);
  for (const char* w : {"a/w", "b/w", "c/w"}) {
    in[w] = RandomTensor(F32({4, 4, 3, 3}), 12 + w[0], -0.3f, 0.3f);
  }
  in["target"] = RandomTensor(F32({2, 4, 5, 5}), 19);
  return in;
}

// The forward pipeline, the backward, then the backward pipeline, as MakeTrainingGraph runs them.
void FuseAndAddBackward(Graph& g, const PassManagerOptions& options = {},
                        std::vector<PassRemark>* remarks = nullptr) {
  PassContext context;
  context.inference = false;
  context.remarks = remarks;
  ASSERT_TRUE(MakeTrainingForwardPipeline(options).Run(g, context).ok());
  AddBackward(g);
  ASSERT_TRUE(MakeTrainingBackwardPipeline(options).Run(g, context).ok());
}

int CountFusedEltwiseRelus(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) {
    n += node->kind() == OpKind::kEltwise && node->GetString("activation") == "relu" ? 1 : 0;
  }
  return n;
}

// ActivationGradient nodes with more than one dy input.
int CountGradientsOfSums(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) {
    n += node->kind() == OpKind::kActivationGradient && node->num_inputs() > 2 ? 1 : 0;
  }
  return n;
}

// The backward's sums of gradients (A's, and R's unless folded into its ReLU backward).
int CountGradientSums(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) {
    n += node->kind() == OpKind::kEltwise && absl::StrContains(node->name(), "grad_sum") ? 1 : 0;
  }
  return n;
}

TEST(FuseEltwiseReluTest, ResidualSumsTakeTheirRelus) {
  auto g = ResidualNet({});
  std::vector<PassRemark> remarks;
  FuseAndAddBackward(*g, {}, &remarks);
  const std::string dump = PrintGraph(*g);
  EXPECT_EQ(CountFusedEltwiseRelus(*g), 2) << dump;
  EXPECT_EQ(CountOps(*g, "ReLU"), 0) << dump;
  const Node* res = g->FindNode("res");
  ASSERT_NE(res, nullptr) << dump;
  EXPECT_EQ(res->GetString("activation"), "relu");
  EXPECT_EQ(res->origins(), (std::vector<std::string>{"res", "res_relu"}));
  // R's gradient sum went into the first block's ReLU backward: three inputs (the fused
  // output, then the two gradients). A's sum stays (a convolution's output, no activation).
  EXPECT_EQ(CountGradientsOfSums(*g), 1) << dump;
  EXPECT_EQ(CountGradientSums(*g), 1) << dump;
  EXPECT_EQ(g->FindNode("res/grad_sum"), nullptr) << dump;
  for (const Node* n : g->nodes()) {
    if (n->kind() == OpKind::kActivationGradient && n->num_inputs() > 2) {
      EXPECT_EQ(n->num_inputs(), 3);
      EXPECT_EQ(n->input(0), (Value{const_cast<Node*>(res), 0}));
      EXPECT_EQ(n->GetString("saved"), "output");
    }
  }
  EXPECT_TRUE(remarks.empty());
}

// A ReLU with a negative slope, or a sum read elsewhere, keeps the ReLU (and the gradient sum
// then has no activation to go into), with the reason recorded; an identical dump either way.
TEST(FuseEltwiseReluTest, DeclinedCasesKeepTheReluAndTheSum) {
  for (const auto& [what, options] : std::vector<std::pair<std::string, ResidualOptions>>{
           {"negative slope", ResidualOptions{-0.2, false}},
           {"sum read elsewhere", ResidualOptions{0, true}}}) {
    auto g = ResidualNet(options);
    const std::string before = PrintGraph(*g);
    std::vector<PassRemark> remarks;
    PassContext context;
    context.inference = false;
    context.remarks = &remarks;
    auto changed = MakeTrainingForwardPipeline().Run(*g, context);
    ASSERT_TRUE(changed.ok()) << what << ": " << changed.status();
    if (what == "negative slope") {
      EXPECT_FALSE(*changed) << what;
      EXPECT_EQ(PrintGraph(*g), before) << what;
      EXPECT_EQ(CountOps(*g, "ReLU"), 2) << what;
    } else {
      EXPECT_EQ(CountFusedEltwiseRelus(*g), 1) << what;  // res2 still fuses
      EXPECT_EQ(g->FindNode("res")->GetString("activation"), "none") << what;
    }
    int eltwise_remarks = 0;
    for (const PassRemark& r : remarks) {
      if (r.pass != "fuse_eltwise_relu") continue;
      ++eltwise_remarks;
      EXPECT_FALSE(r.reason.empty()) << what;
    }
    EXPECT_EQ(eltwise_remarks, what == "negative slope" ? 2 : 1) << what;
  }
}

TEST(FuseGradientSumActivationTest, DisabledByNameKeepsTheSum) {
  auto g = ResidualNet({});
  PassManagerOptions options;
  options.disabled = {"fuse_gradient_sum_activation"};
  FuseAndAddBackward(*g, options);
  EXPECT_EQ(CountFusedEltwiseRelus(*g), 2);
  EXPECT_EQ(CountGradientsOfSums(*g), 0) << PrintGraph(*g);
  EXPECT_EQ(CountGradientSums(*g), 2) << PrintGraph(*g);
  EXPECT_NE(g->FindNode("res/grad_sum"), nullptr) << PrintGraph(*g);
}

// The loss and every gradient of the fused graph against the graph with no rewrite, on the
// reference backend: a fused sum rounds its result to f32 before the ReLU, and a folded
// gradient sum rounds before the mask, as the separate ops do, so they agree to the last bit.
void ExpectResidualFusedTrainsLikeUnfused(const ResidualOptions& options) {
  auto unfused = ResidualNet(options);
  auto fused = ResidualNet(options);
  AddBackward(*unfused);
  FuseAndAddBackward(*fused);
  const Outputs in = ResidualInputs();
  const Outputs want = RunReference(*unfused, in);
  const Outputs got = RunReference(*fused, in);
  ASSERT_FALSE(want.empty());
  for (const char* name : {"loss", "grad/data", "grad/a/w", "grad/b/w", "grad/c/w"}) {
    ASSERT_TRUE(got.count(name) && want.count(name)) << name;
    const HostTensor& a = got.at(name);
    const HostTensor& b = want.at(name);
    ASSERT_EQ(a.type().num_elements(), b.type().num_elements()) << name;
    double largest = 0;
    for (int64_t i = 0; i < a.type().num_elements(); ++i) {
      EXPECT_EQ(a.GetFloat(i), b.GetFloat(i)) << name << " element " << i;
      largest = std::max(largest, std::fabs(double{b.GetFloat(i)}));
    }
    EXPECT_GT(largest, 0) << name;  // nothing compared against all zeros
  }
}

TEST(FuseGradientSumActivationTest, FusedResidualNetTrainsLikeTheUnfusedOne) {
  ExpectResidualFusedTrainsLikeUnfused({});
}

TEST(FuseGradientSumActivationTest, FusedLeakyResidualNetTrainsLikeTheUnfusedOne) {
  ExpectResidualFusedTrainsLikeUnfused({0.1, false});
}

}  // namespace
}  // namespace kiln
