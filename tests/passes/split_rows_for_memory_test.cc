// passes/split_rows_for_memory.cc: a stem convolution computed in bands of rows, each pooled
// at once. Positive (the bands, their padding, the Concat along the height in the pooling's
// place), numerical (the rewritten plan computes what the unrewritten one does, on the reference
// backend and the CPU kernels, overlapping pooling windows and an LRN included), memory (with
// the Concat inputs placed, the plan's activations shrink), negative (each declined section
// keeps the graph and says why) and the pad_end attribute's own checks.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "passes/inference_passes.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::Nhwc;
using testing::RandomTensor;
using testing::RelativeL2;

using Outputs = std::map<std::string, HostTensor>;
using Ints = std::vector<int64_t>;

absl::StatusOr<Outputs> RunPlan(const Graph& g, const Outputs& inputs, BackendChoice backend,
                                bool optimize, std::unique_ptr<ExecutionPlan>* kept = nullptr) {
  CompileOptions options;
  options.backend = backend;
  options.optimize = optimize;
  auto plan = Compile(g, DefaultKernelRegistry(), options);
  if (!plan.ok()) return plan.status();
  auto ctx = ExecutionContext::Create(**plan);
  if (!ctx.ok()) return ctx.status();
  auto out = (*ctx)->Run(inputs);
  if (kept != nullptr) *kept = std::move(*plan);
  return out;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op ? 1 : 0;
  return n;
}

// The graph after the inference pipeline and the rows pass, with the remarks it made.
std::unique_ptr<Graph> Rewrite(const Graph& graph, std::vector<PassRemark>* remarks = nullptr,
                               bool* changed = nullptr) {
  auto g = graph.Clone();
  PassContext context;
  context.remarks = remarks;
  EXPECT_TRUE(MakeInferencePipeline().Run(*g, context).ok());
  PassManager manager;
  manager.Add(MakeSplitRowsForMemoryPass());
  auto result = manager.Run(*g, context);
  EXPECT_TRUE(result.ok()) << result.status();
  if (changed != nullptr) *changed = result.ok() && *result;
  return g;
}

// The rewritten graph computes what the original does, on the reference backend and (NCHW only)
// the CPU kernels, each plan running its graph as it is.
void ExpectSameOutputs(const Graph& graph, const Graph& rewritten, const Outputs& inputs,
                       bool channels_last, const std::string& what = "") {
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    if (channels_last && backend == BackendChoice::kCpu) continue;  // CPU kernels: NCHW
    auto want = RunPlan(graph, inputs, backend, /*optimize=*/false);
    auto got = RunPlan(rewritten, inputs, backend, /*optimize=*/false);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    EXPECT_LE(RelativeL2(got->at("out"), want->at("out")), 2e-6)
        << what << (channels_last ? " NHWC " : " NCHW ") << static_cast<int>(backend);
  }
}

// data -> conv (3x3 pad 1, bias) -> ReLU -> [LRN] -> pooling -> conv2: the stem of FCN (2x2
// pooling) or of AlexNet (an LRN, then 3x3 stride-2 windows that overlap).
std::unique_ptr<Graph> Stem(const TensorType& image, int64_t filters, int64_t pool_kernel, bool lrn,
                            Ints conv_stride = {1}, const std::string& rounding = "ceil") {
  GraphBuilder b(&DefaultOpRegistry());
  const int64_t c = image.dim(1);
  Value x = *b.Input("data", image);
  Value w = *b.Constant("conv1/w", RandomTensor(F32({filters, c, 3, 3}), 1, -0.3f, 0.3f));
  Value bias = *b.Constant("conv1/b", RandomTensor(F32({filters}), 2));
  Value y =
      (*b.Op("Convolution", {x, w, bias}, {{"pad", Ints{1}}, {"stride", conv_stride}}, "conv1"))[0];
  y = *b.Relu(y, 0.0, "relu1");
  if (lrn) y = (*b.Op("LRN", {y}, {{"alpha", 0.5}, {"local_size", int64_t{5}}}, "norm1"))[0];
  Value pool = (*b.Op(
      "Pooling", {y},
      {{"kernel", Ints{pool_kernel}}, {"stride", Ints{2}}, {"rounding", std::string(rounding)}},
      "pool1"))[0];
  Value w2 = *b.Constant("conv2/w", RandomTensor(F32({4, filters, 3, 3}), 3, -0.3f, 0.3f));
  Value out = (*b.Op("Convolution", {pool, w2}, {{"pad", Ints{1}}}, "conv2"))[0];
  EXPECT_TRUE(b.Output("out", out).ok());
  return b.Finish();
}

// FCN's stem: 31 rows pooled 2x2 (ceil) to 16 in bands; the middle bands start inside the
// input (negative padding), the first keeps the top padding, the last the bottom padding.
TEST(SplitRowsForMemoryTest, StemConvolutionRunsInBandsOfRowsPooledAtOnce) {
  auto graph = Stem(F32({2, 16, 31, 12}), 16, 2, /*lrn=*/false);
  auto g = Rewrite(*graph);
  // 2x2 pooling: 4x fewer bytes, so 4 bands (of 4 pooled rows), each about the size of the
  // pooled output.
  EXPECT_EQ(CountOps(*g, "Convolution"), 5) << PrintGraph(*g);
  EXPECT_EQ(CountOps(*g, "Pooling"), 4);
  const Node* concat = g->FindNode("pool1");
  ASSERT_NE(concat, nullptr);
  EXPECT_EQ(concat->op(), "Concat");
  EXPECT_EQ(concat->GetInt("axis"), 2);
  EXPECT_EQ(concat->output_types()[0].dims(), (Ints{2, 16, 16, 6}));
  const Node* first = g->FindNode("conv1/rows0-8");
  const Node* middle = g->FindNode("conv1/rows8-16");
  const Node* last = g->FindNode("conv1/rows24-31");
  ASSERT_TRUE(first != nullptr && middle != nullptr && last != nullptr) << PrintGraph(*g);
  EXPECT_EQ(first->GetInts("pad"), (Ints{1, 1}));
  EXPECT_EQ(first->GetInts("pad_end"), (Ints{-22, 1}));
  EXPECT_EQ(middle->GetInts("pad"), (Ints{-7, 1}));
  EXPECT_EQ(middle->GetInts("pad_end"), (Ints{-14, 1}));
  EXPECT_EQ(last->GetInts("pad"), (Ints{-23, 1}));
  EXPECT_EQ(last->GetInts("pad_end"), (Ints{1, 1}));
  EXPECT_EQ(last->output_types()[0].dims(), (Ints{2, 16, 7, 12}));
  EXPECT_EQ(last->GetString("activation"), "relu");
  EXPECT_EQ(last->origins(), (std::vector<std::string>{"conv1", "relu1"}));
  EXPECT_EQ(g->FindNode("pool1/rows12-16")->origins(), (std::vector<std::string>{"pool1"}));

  // Numerics, on a plan that runs the rewritten graph as it is.
  for (const bool channels_last : {false, true}) {
    const TensorType image = channels_last ? Nhwc({2, 16, 31, 12}) : F32({2, 16, 31, 12});
    auto stem = Stem(image, 16, 2, false);
    auto rewritten = Rewrite(*stem);
    ExpectSameOutputs(*stem, *rewritten, {{"data", RandomTensor(image, 12)}}, channels_last);
  }
}

// AlexNet's stem: a stride-2 convolution, ReLU, an LRN across channels (each band runs its own),
// then 3x3 stride-2 pooling whose windows overlap: each band computes the row its neighbour
// also reads. Floor and ceil rounding; the results are the unsplit graph's.
TEST(SplitRowsForMemoryTest, OverlappingWindowsAndAnLrnGiveTheSameResult) {
  for (const std::string rounding : {"ceil", "floor"}) {
    const TensorType image = F32({2, 16, 46, 13});
    auto graph = Stem(image, 64, 3, /*lrn=*/true, {2}, rounding);
    auto g = Rewrite(*graph);
    const int bands = CountOps(*g, "Pooling");
    EXPECT_GE(bands, 2) << PrintGraph(*g);
    EXPECT_EQ(CountOps(*g, "LRN"), bands);
    EXPECT_EQ(CountOps(*g, "Convolution"), bands + 1);  // and conv2
    // Every band but the last reads one conv row past its pooled rows' stride: 23 conv rows
    // pooled to 11 (both roundings), in bands of 3, 3, 3 and 2 pooled rows; the first three
    // read 7 conv rows each, overlapping their neighbours by one.
    const Node* second = g->FindNode("conv1/rows6-13");
    ASSERT_NE(second, nullptr) << PrintGraph(*g);
    EXPECT_EQ(second->GetString("activation"), "relu");
    ExpectSameOutputs(*graph, *g, {{"data", RandomTensor(image, 21)}}, false, rounding);
  }
}

// CaffeNet's stem at a small size: 3 input channels, an 11x11 stride-4 filter with a bias,
// ReLU, 3x3 stride-2 max pooling (windows overlapping by a row). First layers are where such
// nets peak, so they are split like any other; the result is the unsplit graph's.
TEST(SplitRowsForMemoryTest, FirstLayerWithAWideStridedFilterIsSplit) {
  for (const bool channels_last : {false, true}) {
    const TensorType image = channels_last ? Nhwc({2, 3, 67, 35}) : F32({2, 3, 67, 35});
    GraphBuilder b(&DefaultOpRegistry());
    Value x = *b.Input("data", image);
    Value w = *b.Constant("conv1/w", RandomTensor(F32({96, 3, 11, 11}), 31, -0.2f, 0.2f));
    Value bias = *b.Constant("conv1/b", RandomTensor(F32({96}), 32));
    Value y = (*b.Op("Convolution", {x, w, bias}, {{"stride", Ints{4}}}, "conv1"))[0];
    y = *b.Relu(y, 0.0, "relu1");
    Value pool = (*b.Op("Pooling", {y}, {{"kernel", Ints{3}}, {"stride", Ints{2}}}, "pool1"))[0];
    ASSERT_TRUE(b.Output("out", pool).ok());
    auto graph = b.Finish();
    std::vector<PassRemark> remarks;
    bool changed = false;
    auto g = Rewrite(*graph, &remarks, &changed);
    // 15 conv rows pooled (ceil) to 7: 5x fewer bytes, but at least 2 pooled rows a band, so 3
    // bands of 3, 3 and 1 pooled rows.
    ASSERT_TRUE(changed) << (remarks.empty() ? "" : remarks[0].reason);
    EXPECT_EQ(CountOps(*g, "Convolution"), 3) << PrintGraph(*g);
    const Node* second = g->FindNode("conv1/rows6-13");
    ASSERT_NE(second, nullptr) << PrintGraph(*g);
    EXPECT_EQ(second->GetInts("pad"), (Ints{-24, 0}));
    EXPECT_EQ(second->output_types()[0].dim(2), 7);
    ExpectSameOutputs(*graph, *g, {{"data", RandomTensor(image, 33)}}, channels_last);
  }
}

// The point of the pass: with the pooled bands written into the Concat's output (as CUDA plans
// place them), no step holds the whole convolution output, and the default optimized plan's
// activations are smaller than the same plan's without the pass.
TEST(SplitRowsForMemoryTest, PlacedBandsShrinkThePlannedActivations) {
  auto graph = Stem(F32({2, 16, 63, 40}), 64, 2, /*lrn=*/false);
  auto g = Rewrite(*graph);
  auto placed = g->Clone();
  PassManager placement;
  placement.Add(MakePlaceConcatInputsPass());
  ASSERT_TRUE(placement.Run(*placed, PassContext()).ok());
  CompileOptions plain;
  plain.backend = BackendChoice::kReference;
  auto placed_plan = Compile(*placed, DefaultKernelRegistry(), plain);
  ASSERT_TRUE(placed_plan.ok()) << placed_plan.status();
  for (const PlanStep& s : (*placed_plan)->steps()) {
    if (s.node->kind() == OpKind::kConcat) {
      EXPECT_TRUE(s.is_view) << (*placed_plan)->ToString();
    }
  }
  CompileOptions unsplit;
  unsplit.backend = BackendChoice::kReference;
  unsplit.optimize = true;
  unsplit.disabled_passes = {"split_rows_for_memory"};
  auto whole = Compile(*graph, DefaultKernelRegistry(), unsplit);
  ASSERT_TRUE(whole.ok()) << whole.status();
  // Unsplit: input + conv output + pooled output at the pooling. Split: input + one band +
  // the pooled output.
  EXPECT_LT((*placed_plan)->planned_activation_bytes() * 3,
            (*whole)->planned_activation_bytes() * 2)
      << (*placed_plan)->planned_activation_bytes() << " vs "
      << (*whole)->planned_activation_bytes();
  const Outputs inputs = {{"data", RandomTensor(F32({2, 16, 63, 40}), 5)}};
  auto want = RunPlan(*graph, inputs, BackendChoice::kReference, false);
  auto got = RunPlan(*placed, inputs, BackendChoice::kReference, false);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  EXPECT_LE(RelativeL2(got->at("out"), want->at("out")), 2e-6);
}

// Left alone, with the reason: a pooling that pads its rows (DenseNet's pool1), an LRN within
// channels, an Eltwise between, a second reader and a global pooling. The dump is unchanged.
TEST(SplitRowsForMemoryTest, SectionsThatCannotSplitKeepTheGraph) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({2, 16, 24, 24}));
  auto conv = [&](const std::string& name, uint32_t seed, Value in) {
    Value w = *b.Constant(name + "/w",
                          RandomTensor(F32({32, in.type().dim(1), 3, 3}), seed, -0.3f, 0.3f));
    return (*b.Op("Convolution", {in, w}, {{"pad", Ints{1}}}, name))[0];
  };
  auto pool = [&](Value v, const std::string& name, Ints pad = {0}) {
    return (
        *b.Op("Pooling", {v}, {{"kernel", Ints{2}}, {"stride", Ints{2}}, {"pad", pad}}, name))[0];
  };
  Value padded = pool(conv("padded", 1, x), "pool_padded", {1});
  Value within = (*b.Op("LRN", {conv("within", 2, x)}, {{"region", std::string("within_channel")}},
                        "lrn_within"))[0];
  Value pool_within = pool(within, "pool_within");
  Value summed = conv("summed", 3, x);
  Value sum = (*b.Op("Eltwise", {summed, conv("other", 6, x)}, {}, "sum"))[0];
  Value pool_sum = pool(sum, "pool_sum");
  Value shared = conv("shared", 4, x);
  Value pool_shared = pool(shared, "pool_shared");
  Value global = (*b.Op("Pooling", {conv("global", 5, x)}, {{"global", true}}, "pool_global"))[0];
  int i = 0;
  for (Value v : {padded, pool_within, pool_sum, pool_shared, shared, global}) {
    ASSERT_TRUE(b.Output(absl::StrCat("out", i++), v).ok());
  }
  auto graph = b.Finish();
  auto rewritten = graph->Clone();
  std::vector<PassRemark> remarks;
  PassContext context;
  context.remarks = &remarks;
  PassManager manager;
  manager.Add(MakeSplitRowsForMemoryPass());
  auto changed = manager.Run(*rewritten, context);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(PrintGraph(*rewritten), PrintGraph(*graph));
  std::map<std::string, std::string> why;
  for (const PassRemark& r : remarks) why[r.producer] = r.reason;
  EXPECT_NE(why["padded"].find("pads the rows"), std::string::npos) << why["padded"];
  EXPECT_NE(why["within"].find("within channels"), std::string::npos) << why["within"];
  EXPECT_NE(why["summed"].find("Eltwise"), std::string::npos) << why["summed"];
  EXPECT_NE(why["global"].find("global"), std::string::npos) << why["global"];
  EXPECT_EQ(why.count("shared"), 0u);  // no single reader to name
}

// The attribute itself: pad_end changes the output size, negative pads need it, a wrong count
// is refused with the attribute's name, and pads that leave no window are refused.
TEST(SplitRowsForMemoryTest, PadEndAttributeIsCheckedAndInferenceOnly) {
  auto build = [](AttrMap attrs) {
    GraphBuilder b(&DefaultOpRegistry());
    Value x = *b.Input("data", F32({1, 2, 10, 10}));
    Value w = *b.Constant("w", RandomTensor(F32({3, 2, 3, 3}), 1));
    auto y = b.Op("Convolution", {x, w}, attrs, "conv");
    return y.ok() ? absl::StatusOr<TensorType>(y->at(0).type())
                  : absl::StatusOr<TensorType>(y.status());
  };
  auto band = build({{"pad", Ints{-2, 1}}, {"pad_end", Ints{-3, 1}}});
  ASSERT_TRUE(band.ok()) << band.status();
  EXPECT_EQ(band->dims(), (Ints{1, 3, 3, 10}));  // (10 - 2 - 3 - 3) + 1 rows
  auto negative = build({{"pad", Ints{-1}}});
  EXPECT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("pad must be >= 0"), std::string::npos)
      << negative.status();
  auto wrong = build({{"pad", Ints{1}}, {"pad_end", Ints{1, 1, 1}}});
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("pad_end"), std::string::npos) << wrong.status();
  auto empty = build({{"pad", Ints{-5}}, {"pad_end", Ints{-5}}});
  EXPECT_FALSE(empty.ok());
}

}  // namespace
}  // namespace kiln
