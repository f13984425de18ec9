// The inference rewrites: for each pass a positive test (the text dump shows the expected
// structure), a negative test (nothing to do: the dump is identical) and a numerical test (the
// rewritten graph computes what the original computes, on the reference backend and on the fast
// CPU kernels).
#include "passes/inference_passes.h"

#include <cmath>
#include <map>

#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::Nhwc;
using testing::RandomTensor;

using Outputs = std::map<std::string, HostTensor>;

Outputs RunOn(const Graph& g, const Outputs& inputs, BackendChoice backend) {
  CompileOptions options;
  options.backend = backend;
  auto plan = Compile(g, DefaultKernelRegistry(), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  auto ctx = ExecutionContext::Create(**plan);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  auto out = (*ctx)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Outputs{};
}

// Relative L2 distance of every output, worst over outputs.
double WorstRelativeL2(const Outputs& got, const Outputs& want) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) return INFINITY;
    double num = 0, den = 0;
    for (int64_t i = 0; i < w.type().num_elements(); ++i) {
      const double d = it->second.GetFloat(i) - w.GetFloat(i);
      num += d * d;
      den += static_cast<double>(w.GetFloat(i)) * w.GetFloat(i);
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
  }
  return worst;
}

// Runs the pipeline on a clone and checks that both graphs agree on the reference backend and
// on the fast CPU kernels; returns the rewritten graph.
std::unique_ptr<Graph> RewriteAndCompare(const Graph& graph, const Outputs& inputs,
                                         std::vector<PassRemark>* remarks = nullptr) {
  auto rewritten = graph.Clone();
  PassContext context;
  context.remarks = remarks;
  PassManager pipeline = MakeInferencePipeline();
  auto changed = pipeline.Run(*rewritten, context);
  EXPECT_TRUE(changed.ok()) << changed.status();
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    const Outputs want = RunOn(graph, inputs, BackendChoice::kReference);
    const Outputs got = RunOn(*rewritten, inputs, backend);
    EXPECT_LE(WorstRelativeL2(got, want), 2e-6) << PrintGraph(*rewritten);
  }
  return rewritten;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op ? 1 : 0;
  return n;
}

// Concat steps that copy (a placed Concat is a view and runs nothing).
int RunningConcats(const ExecutionPlan& plan) {
  int n = 0;
  for (const PlanStep& s : plan.steps())
    n += s.node->kind() == OpKind::kConcat && !s.is_view ? 1 : 0;
  return n;
}

Value Conv(GraphBuilder& b, Value x, int64_t k, int64_t c, uint32_t seed, const std::string& name,
           bool bias = true) {
  Value w = *b.Constant(name + "/w", RandomTensor(F32({k, c, 3, 3}), seed, -0.3f, 0.3f));
  std::vector<Value> in = {x, w};
  if (bias) in.push_back(*b.Constant(name + "/b", RandomTensor(F32({k}), seed + 1)));
  return (*b.Op("Convolution", in, {{"pad", std::vector<int64_t>{1}}}, name))[0];
}

Value BatchNormScale(GraphBuilder& b, Value x, int64_t c, uint32_t seed, const std::string& name,
                     bool with_scale = true, bool global_stats = true) {
  Value mean = *b.Constant(name + "/mean", RandomTensor(F32({c}), seed));
  Value var = *b.Constant(name + "/var", RandomTensor(F32({c}), seed + 1, 0.5f, 2.0f));
  HostTensor factor(F32({1}));
  factor.SetFloat(0, 0.5f);  // Caffe's stored sums: divided by this weight
  Value f = *b.Constant(name + "/factor", factor);
  Value y = (*b.Op("BatchNorm", {x, mean, var, f}, {{"use_global_stats", global_stats}}, name))[0];
  if (!with_scale) return y;
  Value s = *b.Constant(name + "_scale/s", RandomTensor(F32({c}), seed + 2));
  Value sb = *b.Constant(name + "_scale/b", RandomTensor(F32({c}), seed + 3));
  return (*b.Op("Scale", {y, s, sb}, {}, name + "_scale"))[0];
}

Outputs Image(uint32_t seed, std::vector<int64_t> dims = {2, 4, 7, 7}) {
  return {{"data", RandomTensor(F32(dims), seed)}};
}

// conv -> BatchNorm -> Scale -> ReLU: one Convolution with new weights and a fused ReLU.
TEST(InferencePassesTest, ConvBatchNormScaleReluBecomesOneConvolution) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value y = *b.Relu(BatchNormScale(b, Conv(b, x, 6, 4, 1, "conv"), 6, 10, "bn"), 0.0, "relu");
  ASSERT_TRUE(b.Output("out", y).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(3));
  EXPECT_EQ(CountOps(*g, "BatchNorm"), 0);
  EXPECT_EQ(CountOps(*g, "Scale"), 0);
  EXPECT_EQ(CountOps(*g, "ReLU"), 0);
  const Node* conv = g->FindNode("conv");
  ASSERT_NE(conv, nullptr) << PrintGraph(*g);
  EXPECT_EQ(conv->GetString("activation"), "relu");
  EXPECT_EQ(conv->origins(), (std::vector<std::string>{"conv", "bn", "bn_scale", "relu"}));
  EXPECT_NE(PrintGraph(*g).find("conv/folded_filter"), std::string::npos);
}

// A bias-free conv (as in ResNet) folds too: the fold adds the bias.
TEST(InferencePassesTest, FoldsIntoABiasFreeConvolutionAndInnerProduct) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value c = BatchNormScale(b, Conv(b, x, 6, 4, 1, "conv", /*bias=*/false), 6, 10, "bn");
  Value w = *b.Constant("ip/w", RandomTensor(F32({6 * 49, 5}), 20, -0.1f, 0.1f));
  Value ip = (*b.Op("InnerProduct", {c, w}, {{"transpose", true}}, "ip"))[0];
  Value y = BatchNormScale(b, ip, 5, 30, "bn_ip", /*with_scale=*/false);
  ASSERT_TRUE(b.Output("out", y).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(4));
  EXPECT_EQ(CountOps(*g, "BatchNorm"), 0) << PrintGraph(*g);
  EXPECT_EQ(g->FindNode("conv")->num_inputs(), 3);
  EXPECT_EQ(g->FindNode("ip")->origins(), (std::vector<std::string>{"ip", "bn_ip"}));
}

// Pre-activation order (DenseNet): BatchNorm + Scale + ReLU before the conv become one Scale
// applying the ReLU.
TEST(InferencePassesTest, UnfoldableBatchNormBecomesOneScale) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value y = Conv(b, *b.Relu(BatchNormScale(b, x, 4, 10, "bn"), 0.0, "relu"), 3, 4, 1, "conv");
  ASSERT_TRUE(b.Output("out", y).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(5));
  EXPECT_EQ(CountOps(*g, "BatchNorm"), 0);
  EXPECT_EQ(CountOps(*g, "Scale"), 1);
  EXPECT_EQ(CountOps(*g, "ReLU"), 0);
  const Node* bn = g->FindNode("bn");
  EXPECT_EQ(bn->op(), "Scale") << PrintGraph(*g);
  EXPECT_EQ(bn->GetString("activation"), "relu");
  EXPECT_EQ(bn->origins(), (std::vector<std::string>{"bn", "bn_scale", "relu"}));
}

// ResNet's blocks: the residual sum and the ReLU go into the main branch's conv; with a
// projection shortcut the later conv takes the sum and the other conv becomes its residual.
TEST(InferencePassesTest, ResidualSumAndReluGoIntoTheConvolution) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value a = *b.Relu(Conv(b, x, 4, 4, 1, "conv_a", false), 0.0, "relu_a");
  Value main = Conv(b, a, 4, 4, 3, "conv_b", false);
  Value sum = (*b.Op("Eltwise", {main, x}, {}, "sum"))[0];
  Value block1 = *b.Relu(sum, 0.0, "relu");
  Value shortcut = Conv(b, block1, 4, 4, 5, "proj");
  Value main2 = Conv(b, block1, 4, 4, 7, "conv_c");
  Value sum2 = (*b.Op("Eltwise", {shortcut, main2}, {}, "sum2"))[0];
  ASSERT_TRUE(b.Output("out", *b.Relu(sum2, 0.1, "relu2")).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(6));
  EXPECT_EQ(CountOps(*g, "Eltwise"), 0) << PrintGraph(*g);
  EXPECT_EQ(CountOps(*g, "ReLU"), 0);
  const Node* conv_b = g->FindNode("conv_b");
  ASSERT_EQ(conv_b->num_inputs(), 4);
  EXPECT_EQ(conv_b->input(3).node->op(), "Parameter");
  EXPECT_EQ(conv_b->GetString("activation"), "relu");
  EXPECT_EQ(conv_b->origins(), (std::vector<std::string>{"conv_b", "sum", "relu"}));
  const Node* conv_c = g->FindNode("conv_c");
  ASSERT_EQ(conv_c->num_inputs(), 4);
  EXPECT_EQ(conv_c->input(3).node->name(), "proj");
  EXPECT_DOUBLE_EQ(conv_c->GetFloat("negative_slope"), 0.1);
}

// A sum that carries its own ReLU (a training rewrite's Eltwise activation) is not taken into
// the convolution as a plain residual sum: its ReLU would be lost.
TEST(InferencePassesTest, SumWithAFusedReluStaysApart) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value main = Conv(b, x, 4, 4, 3, "conv", false);
  Value sum = (*b.Op("Eltwise", {main, x}, {{"activation", std::string("relu")}}, "sum"))[0];
  ASSERT_TRUE(b.Output("out", sum).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(8));
  EXPECT_EQ(CountOps(*g, "Eltwise"), 1) << PrintGraph(*g);
  EXPECT_EQ(g->FindNode("sum")->GetString("activation"), "relu");
  EXPECT_EQ(g->FindNode("conv")->num_inputs(), 2) << PrintGraph(*g);  // no residual input
}

TEST(InferencePassesTest, DropoutIsRemovedAndDeadCodeGoes) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value ip_w = *b.Constant("ip/w", RandomTensor(F32({8, 196}), 2));
  Value ip = (*b.Op("InnerProduct", {x, ip_w}, {}, "ip"))[0];
  Value drop = (*b.Op("Dropout", {ip}, {}, "drop"))[0];
  (void)*b.Relu(ip, 0.0, "unused");
  ASSERT_TRUE(b.Output("out", *b.Relu(drop, 0.0, "relu")).ok());
  auto graph = b.Finish();
  auto g = RewriteAndCompare(*graph, Image(7));
  EXPECT_EQ(CountOps(*g, "Dropout"), 0);
  EXPECT_EQ(g->FindNode("unused"), nullptr);
  EXPECT_EQ(g->FindNode("relu")->input(0).node->name(), "ip");
}

// Nothing to do: the dump is unchanged and the reasons are recorded.
TEST(InferencePassesTest, NegativeCasesLeaveTheGraphAlone) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 7, 7}));
  Value conv = Conv(b, x, 4, 4, 1, "conv");
  Value relu = *b.Relu(conv, 0.0, "relu");  // conv has two readers
  Value prod = (*b.Op("Eltwise", {relu, x}, {{"operation", std::string("prod")}}, "prod"))[0];
  Value bn = BatchNormScale(b, prod, 4, 10, "bn", true, /*global_stats=*/false);
  Value drop = (*b.Op("Dropout", {bn}, {{"training", true}}, "drop"))[0];
  ASSERT_TRUE(b.Output("out", drop).ok());
  ASSERT_TRUE(b.Output("conv_out", conv).ok());
  auto graph = b.Finish();
  std::vector<PassRemark> remarks;
  auto g = RewriteAndCompare(*graph, Image(8), &remarks);
  EXPECT_EQ(PrintGraph(*g), PrintGraph(*graph));
  std::map<std::string, std::string> why;
  for (const PassRemark& r : remarks) why[r.pass + ":" + r.consumer] = r.reason;
  EXPECT_NE(why["fuse_conv_epilogue:relu"].find("2 readers"), std::string::npos);
  EXPECT_NE(why["batchnorm_to_scale:bn"].find("batch statistics"), std::string::npos);
}

// DenseNet's block: each Concat feeds the next, and a pooled tensor and conv outputs feed them.
// With the inputs placed, the plan runs no Concat, every block value lives in the last Concat's
// buffer, and the outputs do not change (reference backend: its kernels write any strides).
TEST(PlaceConcatInputsTest, ProducersWriteIntoTheConcatOutput) {
  for (const bool channels_last : {false, true}) {
    GraphBuilder b(&DefaultOpRegistry());
    // The block's values outweigh the input (which is dead after the pooling), as in DenseNet.
    const TensorType image = channels_last ? testing::Nhwc({2, 4, 4, 4}) : F32({2, 4, 4, 4});
    Value x = *b.Input("data", image);
    Value pool = (*b.Op("Pooling", {x},
                        {{"kernel", std::vector<int64_t>{1}}, {"stride", std::vector<int64_t>{1}}},
                        "pool"))[0];
    Value c1 = Conv(b, *b.Relu(pool, 0.0, "relu1"), 3, 4, 1, "conv1");
    Value cat1 = (*b.Op("Concat", {pool, c1}, {}, "cat1"))[0];
    Value c2 = Conv(b, *b.Relu(cat1, 0.0, "relu2"), 2, 7, 3, "conv2");
    Value cat2 = (*b.Op("Concat", {cat1, c2}, {}, "cat2"))[0];
    ASSERT_TRUE(b.Output("out", Conv(b, cat2, 2, 9, 5, "conv3")).ok());
    auto graph = b.Finish();
    auto placed = graph->Clone();
    PassManager manager;
    manager.Add(MakePlaceConcatInputsPass());
    auto changed = manager.Run(*placed, PassContext());
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_TRUE(*changed);
    const std::vector<int64_t> strides = placed->FindNode("cat2")->output_types()[0].strides();
    for (const char* n : {"pool", "conv1", "cat1", "conv2"}) {
      EXPECT_EQ(placed->FindNode(n)->output_types()[0].strides(), strides) << n;
    }
    // The printed form keeps the strides, and parses back to the same graph.
    auto parsed = ParseGraph(PrintGraph(*placed), &DefaultOpRegistry());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(PrintGraph(**parsed), PrintGraph(*placed));

    const Outputs inputs = {{"data", RandomTensor(image, 11)}};
    CompileOptions options;
    options.backend = BackendChoice::kReference;
    auto original_plan = Compile(*graph, DefaultKernelRegistry(), options);
    auto placed_plan = Compile(*placed, DefaultKernelRegistry(), options);
    ASSERT_TRUE(original_plan.ok() && placed_plan.ok());
    EXPECT_EQ(RunningConcats(**placed_plan), 0) << (*placed_plan)->ToString();
    EXPECT_LT((*placed_plan)->planned_activation_bytes(),
              (*original_plan)->planned_activation_bytes());
    EXPECT_LE(WorstRelativeL2(RunOn(*placed, inputs, BackendChoice::kReference),
                              RunOn(*graph, inputs, BackendChoice::kReference)),
              1e-7);
  }
}

// A Concat input that is also a graph output, or that feeds a second Concat, stays where it is.
TEST(PlaceConcatInputsTest, InputsThatCannotMoveLeaveTheConcat) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 4, 8, 8}));
  Value r = *b.Relu(x, 0.0, "relu");
  Value s = *b.Op1("Sigmoid", {x}, {}, "sig");
  Value cat1 = (*b.Op("Concat", {r, s}, {}, "cat1"))[0];
  Value cat2 = (*b.Op("Concat", {s, x}, {}, "cat2"))[0];
  ASSERT_TRUE(b.Output("a", cat1).ok());
  ASSERT_TRUE(b.Output("b", cat2).ok());
  ASSERT_TRUE(b.Output("r", r).ok());
  auto graph = b.Finish();
  auto placed = graph->Clone();
  std::vector<PassRemark> remarks;
  PassContext context;
  context.remarks = &remarks;
  PassManager manager;
  manager.Add(MakePlaceConcatInputsPass());
  auto changed = manager.Run(*placed, context);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(PrintGraph(*placed), PrintGraph(*graph));
  ASSERT_EQ(remarks.size(), 2u);
}

// A graph output reached through Crop -> Convert, as a 16-bit channels-last plan ends for
// FCN-8s (here f32 NHWC scores cropped, then converted to f16 row-major): the Crop takes the
// Convert in and writes its dtype and order. The graph computes the same values bit for bit,
// prints and parses back, and runs one step fewer.
TEST(FoldConvertIntoCropTest, TheCropWritesTheConvertsDtypeAndOrder) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", Nhwc({2, 5, 9, 8}));
  Value ref = *b.Input("ref", F32({2, 5, 6, 5}));
  Value crop = (*b.Op("Crop", {x, ref}, {{"offset", std::vector<int64_t>{2, 1}}}, "score"))[0];
  Value out = (*b.Op("Convert", {crop},
                     {{"dtype", std::string("f16")}, {"layout", std::string("row_major")}},
                     "score/to_output"))[0];
  ASSERT_TRUE(b.Output("score", out).ok());
  auto graph = b.Finish();
  auto folded = graph->Clone();
  PassManager manager;
  manager.Add(MakeFoldConvertIntoCropPass());
  auto changed = manager.Run(*folded, PassContext());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(folded->FindNode("score/to_output"), nullptr) << PrintGraph(*folded);
  const Node* fused = folded->FindNode("score");
  ASSERT_NE(fused, nullptr) << PrintGraph(*folded);
  EXPECT_EQ(fused->op(), "Crop");
  EXPECT_EQ(fused->GetString("dtype"), "f16");
  EXPECT_EQ(fused->output_types()[0], graph->FindNode("score/to_output")->output_types()[0]);
  auto parsed = ParseGraph(PrintGraph(*folded), &DefaultOpRegistry());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(PrintGraph(**parsed), PrintGraph(*folded));

  const Outputs inputs = {{"data", RandomTensor(Nhwc({2, 5, 9, 8}), 12)},
                          {"ref", RandomTensor(F32({2, 5, 6, 5}), 13)}};
  const Outputs want = RunOn(*graph, inputs, BackendChoice::kReference);
  const Outputs got = RunOn(*folded, inputs, BackendChoice::kReference);
  const HostTensor& w = want.at("score");
  const HostTensor& g = got.at("score");
  ASSERT_EQ(g.type(), w.type());
  ASSERT_EQ(w.type().dtype(), DataType::kF16);
  for (int64_t i = 0; i < w.type().num_elements(); ++i) {
    ASSERT_EQ(g.GetFloat(i), w.GetFloat(i)) << i;
  }
}

// A Crop that something else also reads keeps its own output, and its Convert stays.
TEST(FoldConvertIntoCropTest, ACropWithOtherReadersKeepsItsConvert) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", Nhwc({2, 5, 9, 8}));
  Value ref = *b.Input("ref", F32({2, 5, 6, 5}));
  Value crop = (*b.Op("Crop", {x, ref}, {{"offset", std::vector<int64_t>{1}}}, "crop"))[0];
  Value out = (*b.Op("Convert", {crop}, {{"dtype", std::string("f16")}}, "crop/to_output"))[0];
  ASSERT_TRUE(b.Output("converted", out).ok());
  ASSERT_TRUE(b.Output("relu", *b.Relu(crop, 0.0, "relu")).ok());
  auto graph = b.Finish();
  auto folded = graph->Clone();
  std::vector<PassRemark> remarks;
  PassContext context;
  context.remarks = &remarks;
  PassManager manager;
  manager.Add(MakeFoldConvertIntoCropPass());
  auto changed = manager.Run(*folded, context);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(PrintGraph(*folded), PrintGraph(*graph));
  ASSERT_EQ(remarks.size(), 1u);
}

// Deconvolution 9x7 -> 20x16 (4x4 filter, stride 2) read by a Crop: pad grows by the margin the
// Crop drops on both sides, which may exceed the filter (rows: 5 = min(5, 20 - 8 - 5)).
Value UpsampleAndCrop(GraphBuilder& b, const std::vector<int64_t>& kept,
                      const std::vector<int64_t>& offset) {
  Value x = *b.Input("data", F32({2, 3, 9, 7}));
  Value ref = *b.Input("ref", F32(kept));
  Value w = *b.Constant("up/w", RandomTensor(F32({3, 4, 4, 4}), 3));
  Value bias = *b.Constant("up/b", RandomTensor(F32({4}), 4));
  Value up = (*b.Op("Deconvolution", {x, w, bias}, {{"stride", std::vector<int64_t>{2}}}, "up"))[0];
  return (*b.Op("Crop", {up, ref}, {{"axis", int64_t{2}}, {"offset", offset}}, "score"))[0];
}

TEST(ShrinkDeconvolutionToCropTest, TheDeconvolutionComputesOnlyTheCropsWindow) {
  GraphBuilder b(&DefaultOpRegistry());
  ASSERT_TRUE(b.Output("score", UpsampleAndCrop(b, {2, 4, 8, 11}, {5, 2})).ok());
  auto graph = b.Finish();
  const Outputs inputs = {{"data", RandomTensor(F32({2, 3, 9, 7}), 5)},
                          {"ref", RandomTensor(F32({2, 4, 8, 11}), 6)}};
  auto rewritten = RewriteAndCompare(*graph, inputs);
  const Node* up = rewritten->FindNode("up");
  const Node* score = rewritten->FindNode("score");
  ASSERT_TRUE(up != nullptr && score != nullptr) << PrintGraph(*rewritten);
  EXPECT_EQ(up->op(), "Deconvolution");
  EXPECT_EQ(up->GetInts("pad"), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(up->output_types()[0].dims(), (std::vector<int64_t>{2, 4, 10, 12}));
  EXPECT_EQ(up->origins(), std::vector<std::string>{"up"});
  EXPECT_EQ(score->op(), "Crop");
  EXPECT_EQ(score->GetInts("offset"), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(score->input(0).node, up);
  EXPECT_EQ(CountOps(*rewritten, "Deconvolution"), 1);
}

// Equal margins on both sides of every dim: the shrunk Deconvolution is the output.
TEST(ShrinkDeconvolutionToCropTest, ACropWithNothingLeftToCutGoes) {
  GraphBuilder b(&DefaultOpRegistry());
  ASSERT_TRUE(b.Output("score", UpsampleAndCrop(b, {2, 4, 14, 10}, {3, 3})).ok());
  auto graph = b.Finish();
  const Outputs inputs = {{"data", RandomTensor(F32({2, 3, 9, 7}), 7)},
                          {"ref", RandomTensor(F32({2, 4, 14, 10}), 8)}};
  auto rewritten = RewriteAndCompare(*graph, inputs);
  EXPECT_EQ(CountOps(*rewritten, "Crop"), 0) << PrintGraph(*rewritten);
  const Node* up = rewritten->FindNode("up");
  ASSERT_NE(up, nullptr) << PrintGraph(*rewritten);
  EXPECT_EQ(up->GetInts("pad"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(up->origins(), (std::vector<std::string>{"up", "score"}));
  EXPECT_EQ(rewritten->outputs()[0].value.node, up);
}

// A Crop at an edge (offset 0) or a Deconvolution with another reader: nothing changes.
TEST(ShrinkDeconvolutionToCropTest, EdgeCropsAndSharedOutputsKeepTheGraph) {
  for (const bool shared : {false, true}) {
    GraphBuilder b(&DefaultOpRegistry());
    Value score = UpsampleAndCrop(b, {2, 4, 8, 11}, {shared ? 5 : 0, shared ? 2 : 5});
    ASSERT_TRUE(b.Output("score", score).ok());
    if (shared) ASSERT_TRUE(b.Output("upsampled", score.node->input(0)).ok());
    auto graph = b.Finish();
    auto same = graph->Clone();
    std::vector<PassRemark> remarks;
    PassContext context;
    context.remarks = &remarks;
    PassManager manager;
    manager.Add(MakeShrinkDeconvolutionToCropPass());
    auto changed = manager.Run(*same, context);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_FALSE(*changed);
    EXPECT_EQ(PrintGraph(*same), PrintGraph(*graph));
    // Only the shared output is a missed rewrite; an edge Crop has nothing to save.
    ASSERT_EQ(remarks.size(), shared ? 1u : 0u);
    if (shared) EXPECT_NE(remarks[0].reason.find("other readers"), std::string::npos);
  }
}

// The stem conv1 -> BatchNorm -> Scale -> ReLU -> pooling, in both memory orders, with
// --optimize memory: conv1 runs in slices of 8 output channels, each pooled at once, the Concat
// takes the pooling's name; the outputs do not change, and with the Concat inputs placed the
// plan's activations shrink.
TEST(SplitForMemoryTest, StemConvolutionRunsInChannelSlicesPooledAtOnce) {
  for (const bool channels_last : {false, true}) {
    GraphBuilder b(&DefaultOpRegistry());
    const TensorType image = channels_last ? Nhwc({2, 3, 16, 16}) : F32({2, 3, 16, 16});
    Value x = *b.Input("data", image);
    Value w = *b.Constant("conv1/w", RandomTensor(F32({28, 3, 3, 3}), 1, -0.3f, 0.3f));
    Value c = (*b.Op("Convolution", {x, w}, {{"pad", std::vector<int64_t>{1}}}, "conv1"))[0];
    Value r = *b.Relu(BatchNormScale(b, c, 28, 10, "bn1"), 0.0, "relu1");
    Value pool = (*b.Op("Pooling", {r},
                        {{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}},
                        "pool1"))[0];
    ASSERT_TRUE(b.Output("out", Conv(b, pool, 4, 28, 3, "conv2")).ok());
    auto graph = b.Finish();

    CompileOptions options;
    options.backend = BackendChoice::kReference;
    options.optimize = true;
    // Bands of rows would take the stem first (tests/passes/split_rows_for_memory_test.cc).
    options.disabled_passes = {"split_rows_for_memory"};
    auto fused = Compile(*graph, DefaultKernelRegistry(), options);
    options.split_for_memory = true;
    auto split = Compile(*graph, DefaultKernelRegistry(), options);
    ASSERT_TRUE(fused.ok() && split.ok()) << fused.status() << split.status();
    const Graph& g = (*split)->graph();
    // 28 channels, slices no larger than the pooled output (a quarter): 7 -> 8 channels each.
    EXPECT_EQ(CountOps(g, "Convolution"), 5) << PrintGraph(g);
    EXPECT_EQ(CountOps(g, "Pooling"), 4);
    ASSERT_NE(g.FindNode("pool1"), nullptr);
    EXPECT_EQ(g.FindNode("pool1")->op(), "Concat");
    const Node* last = g.FindNode("conv1/ch24-28");
    ASSERT_NE(last, nullptr) << PrintGraph(g);
    EXPECT_EQ(last->GetString("activation"), "relu");
    EXPECT_EQ(last->origins(), (std::vector<std::string>{"conv1", "bn1", "bn1_scale", "relu1"}));
    EXPECT_EQ(last->input(1).type().dims(), (std::vector<int64_t>{4, 3, 3, 3}));

    const Outputs inputs = {{"data", RandomTensor(image, 12)}};
    for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
      if (channels_last && backend == BackendChoice::kCpu) continue;  // CPU kernels: NCHW
      EXPECT_LE(WorstRelativeL2(RunOn(g, inputs, backend), RunOn(*graph, inputs, backend)), 2e-6);
    }
    // With the pooled slices written into the Concat's output (as CUDA plans place them), no
    // step holds the whole convolution output: less than the fused plan's activations.
    auto placed = g.Clone();
    PassManager placement;
    placement.Add(MakePlaceConcatInputsPass());
    ASSERT_TRUE(placement.Run(*placed, PassContext()).ok());
    CompileOptions plain;
    plain.backend = BackendChoice::kReference;
    auto placed_plan = Compile(*placed, DefaultKernelRegistry(), plain);
    ASSERT_TRUE(placed_plan.ok()) << placed_plan.status();
    EXPECT_EQ(RunningConcats(**placed_plan), 0) << (*placed_plan)->ToString();
    EXPECT_LT((*placed_plan)->planned_activation_bytes(), (*fused)->planned_activation_bytes());
    EXPECT_LE(WorstRelativeL2(RunOn(*placed, inputs, BackendChoice::kReference),
                              RunOn(*graph, inputs, BackendChoice::kReference)),
              2e-6);
  }
}

// AlexNet's stem, conv1 -> ReLU -> LRN across 5 channels -> pooling: each slice computes the 2
// channels either side that its LRN windows read and keeps its own with a Slice; the outputs
// are those of the unsplit graph.
TEST(SplitForMemoryTest, AnLrnBetweenTakesAHaloOfChannels) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 3, 16, 16}));
  Value w = *b.Constant("conv1/w", RandomTensor(F32({28, 3, 3, 3}), 1, -0.3f, 0.3f));
  Value bias = *b.Constant("conv1/b", RandomTensor(F32({28}), 2));
  Value c = (*b.Op("Convolution", {x, w, bias}, {{"pad", std::vector<int64_t>{1}}}, "conv1"))[0];
  Value n = (*b.Op("LRN", {*b.Relu(c, 0.0, "relu1")}, {{"alpha", 0.5}}, "norm1"))[0];
  Value pool = (*b.Op("Pooling", {n},
                      {{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}},
                      "pool1"))[0];
  ASSERT_TRUE(b.Output("out", pool).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kReference;
  options.optimize = true;
  options.split_for_memory = true;
  options.disabled_passes = {"split_rows_for_memory"};
  auto split = Compile(*graph, DefaultKernelRegistry(), options);
  ASSERT_TRUE(split.ok()) << split.status();
  const Graph& g = (*split)->graph();
  EXPECT_EQ(CountOps(g, "LRN"), 4) << PrintGraph(g);
  EXPECT_EQ(CountOps(g, "Slice"), 4);
  // The first slice reads 2 channels past its 8, the middle ones 2 either side, the last 2 before.
  for (const char* name : {"conv1/ch0-10", "conv1/ch6-18", "conv1/ch14-26", "conv1/ch22-28"}) {
    EXPECT_NE(g.FindNode(name), nullptr) << name << "\n" << PrintGraph(g);
  }
  const Outputs inputs = {{"data", RandomTensor(F32({2, 3, 16, 16}), 13)}};
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    EXPECT_LE(WorstRelativeL2(RunOn(g, inputs, backend), RunOn(*graph, inputs, backend)), 2e-6);
  }
}

// Left alone, with the reason: a grouped convolution, one with a second reader, one whose
// reader is not a pooling, and a pooling that keeps the size.
TEST(SplitForMemoryTest, ConvolutionsThatCannotSplitKeepTheGraph) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 16, 8, 8}));
  Value wg = *b.Constant("grouped/w", RandomTensor(F32({32, 8, 3, 3}), 1, -0.3f, 0.3f));
  Value g = (*b.Op("Convolution", {x, wg},
                   {{"pad", std::vector<int64_t>{1}}, {"group", int64_t{2}}}, "grouped"))[0];
  Value p1 = (*b.Op("Pooling", {g},
                    {{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}},
                    "pool_g"))[0];
  Value two = Conv(b, x, 32, 16, 2, "two_readers");
  Value p2 = (*b.Op("Pooling", {two},
                    {{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}},
                    "pool_two"))[0];
  Value lrn = (*b.Op("LRN", {Conv(b, x, 32, 16, 3, "to_lrn")}, {}, "lrn"))[0];
  Value same = (*b.Op("Pooling", {Conv(b, x, 32, 16, 4, "to_same")},
                      {{"kernel", std::vector<int64_t>{3}}, {"pad", std::vector<int64_t>{1}}},
                      "pool_same"))[0];
  for (auto [name, v] : std::vector<std::pair<std::string, Value>>{
           {"a", p1}, {"b", p2}, {"c", two}, {"d", lrn}, {"e", same}}) {
    ASSERT_TRUE(b.Output(name, v).ok());
  }
  auto graph = b.Finish();
  auto rewritten = graph->Clone();
  std::vector<PassRemark> remarks;
  PassContext context;
  context.remarks = &remarks;
  PassManager manager;
  manager.Add(MakeSplitForMemoryPass());
  auto changed = manager.Run(*rewritten, context);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(PrintGraph(*rewritten), PrintGraph(*graph));
  std::map<std::string, std::string> why;
  for (const PassRemark& r : remarks) why[r.producer] = r.reason;
  EXPECT_NE(why["grouped"].find("grouped"), std::string::npos);
  EXPECT_NE(why["to_lrn"].find("the LRN's output has several readers or is an output"),
            std::string::npos);
  EXPECT_NE(why["to_same"].find("does not halve"), std::string::npos);
  EXPECT_EQ(why.count("two_readers"), 0u);  // no single reader to name
}

class CountingPass : public Pass {
 public:
  CountingPass(std::string name, int changes) : name_(std::move(name)), changes_(changes) {}
  absl::string_view name() const override { return name_; }
  absl::StatusOr<bool> Run(Graph&, const PassContext&) override {
    ++runs;
    return changes_-- > 0;
  }
  int runs = 0;

 private:
  std::string name_;
  int changes_;
};

std::unique_ptr<Graph> Chain() {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 3}));
  Value r3 = *b.Relu(*b.Relu(*b.Relu(x, 0.0, "r1"), 0.0, "r2"), 0.0, "r3");
  EXPECT_TRUE(b.Output("out", r3).ok());
  return b.Finish();
}

TEST(PassManagerTest, FixedPointGroupsRunUntilNothingChanges) {
  auto g = Chain();
  auto pass = std::make_unique<CountingPass>("twice", 2);
  CountingPass* raw = pass.get();
  std::vector<std::unique_ptr<Pass>> group;
  group.push_back(std::move(pass));
  PassManager manager;
  manager.AddFixedPointGroup(std::move(group));
  auto changed = manager.Run(*g, PassContext());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(raw->runs, 3);  // two changing rounds, one quiet one
  EXPECT_EQ(manager.history().size(), 3u);
}

TEST(PassManagerTest, AnOscillatingGroupIsAnError) {
  auto g = Chain();
  std::vector<std::unique_ptr<Pass>> group;
  group.push_back(std::make_unique<CountingPass>("forever", 1000));
  PassManager manager;
  manager.AddFixedPointGroup(std::move(group), 4);
  auto changed = manager.Run(*g, PassContext());
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(changed.status().message().find("forever"), std::string::npos);
}

TEST(PassManagerTest, DisabledPassesDoNotRunAndDumpsComeAfterNamedPasses) {
  auto g = Chain();
  std::vector<std::string> dumped;
  PassManagerOptions options;
  options.disabled = {"off"};
  options.dump_after = {"on"};
  options.dump = [&](absl::string_view pass, const std::string& ir) {
    dumped.push_back(std::string(pass) + "\n" + ir);
  };
  PassManager manager(options);
  auto off = std::make_unique<CountingPass>("off", 1);
  CountingPass* off_raw = off.get();
  manager.Add(std::move(off)).Add(std::make_unique<CountingPass>("on", 0));
  ASSERT_TRUE(manager.Run(*g, PassContext()).ok());
  EXPECT_EQ(off_raw->runs, 0);
  ASSERT_EQ(dumped.size(), 1u);
  EXPECT_EQ(dumped[0], "on\n" + PrintGraph(*g));
}

// A pass that leaves a cycle is caught by the verifier, and the error names the pass.
class CyclePass : public Pass {
 public:
  absl::string_view name() const override { return "make_cycle"; }
  absl::StatusOr<bool> Run(Graph& g, const PassContext&) override {
    Node* r1 = g.FindNode("r1");
    Node* r3 = g.FindNode("r3");
    auto s = g.ReplaceAllUsesWith(r1->output(0), r3->output(0));
    if (!s.ok()) return s;
    return true;
  }
};

TEST(PassManagerTest, VerifierFailureNamesThePass) {
  auto g = Chain();
  PassManager manager;
  manager.Add(std::make_unique<CyclePass>());
  auto changed = manager.Run(*g, PassContext());
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find("after pass make_cycle"), std::string::npos)
      << changed.status();
}

// The names --disable-pass accepts come from the pipelines themselves, in the order the
// compiler's error lists them; an unknown name is refused with that list.
TEST(KnownPassNamesTest, ListsEveryPipelinePassAndRefusesOthers) {
  const std::string known =
      "remove_dropout, fold_batchnorm, batchnorm_to_scale, fuse_conv_epilogue, fuse_pointwise, "
      "shrink_deconvolution_to_crop, dead_code, place_concat_inputs, fold_convert_into_crop, "
      "split_rows_for_memory, split_for_memory";
  std::string joined;
  for (const std::string& name : KnownPassNames()) {
    joined += (joined.empty() ? "" : ", ") + name;
  }
  EXPECT_EQ(joined, known);
  EXPECT_TRUE(ValidatePassNames({}).ok());
  EXPECT_TRUE(ValidatePassNames({"dead_code", "split_for_memory"}).ok());
  absl::Status bad = ValidatePassNames({"dead_code", "no_such_pass", "zzz"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "compile: no pass named 'no_such_pass'; passes: " + known);
}

}  // namespace
}  // namespace kiln
