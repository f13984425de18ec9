// The IR: builder, verifier, printer/parser round trip, graph mutation.
#include "ir/graph.h"

#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

const OpRegistry* Registry() { return &DefaultOpRegistry(); }

// conv -> relu -> pool -> lrn -> ip -> softmax, plus a slice with two outputs.
std::unique_ptr<Graph> SmallGraph() {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 3, 9, 9}));
  Value w = *b.Constant("w", RandomTensor(F32({4, 3, 3, 3}), 1));
  Value bias = *b.Constant("b", RandomTensor(F32({4}), 2));
  ConvolutionOptions conv;
  conv.pad = {1};
  Value c = *b.Convolution(x, w, &bias, conv, "conv");
  Value r = *b.Relu(c, 0.1, "relu");
  PoolingOptions pool;
  pool.kernel = {3};
  pool.stride = {2};
  pool.ceil_rounding = true;
  Value p = *b.Pooling(r, pool, "pool");
  Value n = *b.Lrn(p, {}, "lrn");
  std::vector<Value> halves =
      *b.Op("Slice", {n}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}}, "slice");
  Value fw = *b.Constant("fw", RandomTensor(F32({5, 2 * 4 * 4}), 3));
  Value fc = *b.InnerProduct(halves[1], fw, nullptr, "fc");
  Value prob = *b.Softmax(fc, 1, "prob");
  EXPECT_TRUE(b.Output("prob", prob).ok());
  EXPECT_TRUE(b.Output("first_half", halves[0]).ok());
  return b.Finish();
}

TEST(GraphBuilderTest, ShapesAreInferredAtEveryCall) {
  auto g = SmallGraph();
  EXPECT_EQ(g->FindNode("conv")->output_types()[0].dims(), (std::vector<int64_t>{2, 4, 9, 9}));
  EXPECT_EQ(g->FindNode("pool")->output_types()[0].dims(),
            (std::vector<int64_t>{2, 4, 4, 4}));  // ceil((9-3)/2)+1
  EXPECT_EQ(g->FindNode("slice")->num_outputs(), 2);
  EXPECT_EQ(g->FindNode("prob")->output_types()[0].dims(), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

TEST(GraphBuilderTest, BadShapeNamesNodeAndRule) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({1, 3, 8, 8}));
  Value w = *b.Constant("w", RandomTensor(F32({4, 2, 3, 3}), 1));
  auto c = b.Convolution(x, w, nullptr, {}, "conv1");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("node 'conv1' (Convolution)"), std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("channels per group"), std::string::npos) << c.status();
}

TEST(GraphBuilderTest, UnknownAttributeIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({1, 3}));
  auto r = b.Op1("ReLU", {x}, {{"slope", 0.5}}, "r");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown attribute 'slope'"), std::string::npos);
}

TEST(GraphBuilderTest, WrongAttributeKindIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({1, 3}));
  auto r = b.Op1("ReLU", {x}, {{"negative_slope", std::string("big")}}, "r");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected float"), std::string::npos) << r.status();
}

TEST(GraphBuilderTest, MissingRequiredAttributeIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 6}));
  auto r = b.Op1("Reshape", {x}, {}, "reshape");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("required attribute 'shape'"), std::string::npos);
}

TEST(GraphBuilderTest, WrongInputCountIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 6}));
  auto r = b.Op1("Convolution", {x}, {}, "c");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("takes 2 to 4 inputs, got 1"), std::string::npos);
}

TEST(GraphBuilderTest, UnknownOpIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 6}));
  auto r = b.Op1("Frobnicate", {x}, {}, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown op 'Frobnicate'"), std::string::npos);
}

TEST(GraphBuilderTest, DuplicateNodeNameIsAnError) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 6}));
  ASSERT_TRUE(b.Relu(x, 0, "r").ok());
  EXPECT_FALSE(b.Relu(x, 0, "r").ok());
  EXPECT_FALSE(b.Input("data", F32({1})).ok());
}

TEST(GraphBuilderTest, ValueFromAnotherGraphIsRejected) {
  GraphBuilder a(Registry()), b(Registry());
  Value x = *a.Input("data", F32({2, 6}));
  ASSERT_TRUE(b.Input("other", F32({2, 6})).ok());
  EXPECT_FALSE(b.Relu(x, 0, "r").ok());
}

TEST(GraphBuilderTest, OutputNamesAreUnique) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 6}));
  ASSERT_TRUE(b.Output("y", x).ok());
  EXPECT_FALSE(b.Output("y", x).ok());
}

TEST(TextFormatTest, PrintParsePrintIsIdentical) {
  auto g = SmallGraph();
  const std::string text = PrintGraph(*g);
  auto parsed = ParseGraph(text, Registry());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(PrintGraph(**parsed), text);
  EXPECT_TRUE(VerifyGraph(**parsed).ok());
}

TEST(TextFormatTest, RoundTripKeepsConstantsBitExact) {
  GraphBuilder b(Registry());
  Value x = *b.Input(
      "data", *TensorType::CreateWithLayout(DataType::kF16, {1, 2, 3, 3}, Layout::kChannelsLast));
  HostTensor w = RandomTensor(*TensorType::Create(DataType::kF16, {2, 2, 1, 1}), 5);
  HostTensor labels(*TensorType::Create(DataType::kI32, {3}));
  labels.data_as<int32_t>()[0] = 2147483647;
  labels.data_as<int32_t>()[1] = -7;
  Value wv = *b.Constant("w", w);
  ASSERT_TRUE(b.Constant("labels", labels).ok());
  ASSERT_TRUE(b.Output("y", *b.Convolution(x, wv, nullptr, {}, "conv")).ok());
  auto g = b.Finish();
  auto parsed = ParseGraph(PrintGraph(*g), Registry());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const HostTensor* w2 = (*parsed)->FindNode("w")->constant();
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(w2->GetFloat(i), w.GetFloat(i));
  EXPECT_EQ((*parsed)->FindNode("labels")->constant()->data_as<int32_t>()[0], 2147483647);
  EXPECT_EQ((*parsed)->FindNode("conv")->output_types()[0].ToString(), "f16[1,2,3,3]{18,1,6,2}");
}

TEST(TextFormatTest, AttributeValuesRoundTrip) {
  for (const AttrValue& v :
       {AttrValue(int64_t{-3}), AttrValue(0.1), AttrValue(1e-5), AttrValue(2.0), AttrValue(true),
        AttrValue(std::string("a \"q\"\n")), AttrValue(std::vector<int64_t>{1, -2}),
        AttrValue(std::vector<double>{0.5, 3.0})}) {
    std::string text = AttrValueToString(v);
    absl::string_view rest = text;
    auto parsed = ConsumeAttrValue(&rest);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_TRUE(rest.empty());
    EXPECT_EQ(*parsed, v) << text;
  }
}

TEST(TextFormatTest, ErrorsCarryLineAndColumn) {
  const std::string text =
      "%0 = Parameter \"x\" () {dtype=\"f32\", shape=[1,3]} : f32[1,3]\n"
      "%1 = ReLU \"r\" (%7) {} : f32[1,3]\n";
  auto g = ParseGraph(text, Registry());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("line 2, column"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("%7 is not defined"), std::string::npos) << g.status();
}

TEST(TextFormatTest, WrongWrittenTypeIsRejected) {
  const std::string text =
      "%0 = Parameter \"x\" () {dtype=\"f32\", shape=[1,3]} : f32[1,3]\n"
      "%1 = ReLU \"r\" (%0) {} : f32[1,4]\n";
  auto g = ParseGraph(text, Registry());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("differ from the inferred f32[1,3]"), std::string::npos)
      << g.status();
}

TEST(TextFormatTest, MalformedLinesAreRejected) {
  for (const char* bad :
       {"%0 = ", "%0 = ReLU", "%a = ReLU \"r\" () {} : f32[1]",
        "%0 = Parameter \"x\" () {dtype=\"f32\", shape=[1,3]} : f32[1,3] junk", "output \"y\" = %0",
        "%0 = Constant \"c\" () {} : f32[2] = [1]",
        // Found by tests/fuzz/graph_text (corpus/graph_text/regress_i32_constant_out_of_range):
        // a value outside int32 was converted to int32 (undefined behaviour, a UBSan report).
        "%0 = Constant \"c\" () {} : i32[] = [5000000000000000]",
        "%0 = Constant \"c\" () {} : i32[2] = [1, -2147483649]",
        "%0 = Constant \"c\" () {} : i32[1] = [nan]",
        "%0 = Parameter \"x\" () {shape=[1], shape=[2], dtype=\"f32\"} : f32[1]"}) {
    EXPECT_FALSE(ParseGraph(bad, Registry()).ok()) << bad;
  }
}

TEST(TextFormatTest, CommentsAndBlankLinesAreSkipped) {
  auto g = ParseGraph(
      "# a graph\n\n%0 = Parameter \"x\" () {dtype=\"f32\", shape=[2]} : f32[2]\n"
      "output \"x\" = %0\n",
      Registry());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->num_nodes(), 1);
}

TEST(GraphTest, ReplaceAllUsesAndRemoveDead) {
  auto g = SmallGraph();
  Node* relu = g->FindNode("relu");
  Node* conv = g->FindNode("conv");
  ASSERT_TRUE(g->ReplaceAllUsesWith(relu->output(0), conv->output(0)).ok());
  EXPECT_EQ(g->FindNode("pool")->input(0), conv->output(0));
  EXPECT_EQ(g->RemoveDeadNodes(), 1);
  EXPECT_EQ(g->FindNode("relu"), nullptr);
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

TEST(GraphTest, ReplaceAllUsesChecksTypes) {
  auto g = SmallGraph();
  EXPECT_FALSE(
      g->ReplaceAllUsesWith(g->FindNode("conv")->output(0), g->FindNode("pool")->output(0)).ok());
}

TEST(GraphTest, VerifierFindsCycle) {
  GraphBuilder b(Registry());
  Value x = *b.Input("x", F32({1, 4}));
  Value a = *b.Relu(x, 0, "a");
  Value c = *b.Op1("TanH", {a}, {}, "c");
  ASSERT_TRUE(b.Output("y", c).ok());
  auto g = b.Finish();
  // Make a read c: a -> c -> a.
  ASSERT_TRUE(g->ReplaceAllUsesWith(x, c).ok());
  absl::Status s = VerifyGraph(*g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cycle"), std::string::npos) << s;
}

TEST(GraphTest, TopologicalOrderIsDeterministic) {
  auto g = SmallGraph();
  auto order = g->TopologicalOrder();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ((*order)[0]->name(), "data");
  EXPECT_EQ(order->back()->name(), "prob");
}

// A node that feeds no other node (it only writes a graph output) runs as soon as its input is
// ready, even when it was created last: a pass's output Convert, a training plan's gradient.
// By creation id alone it would run at the very end.
TEST(GraphTest, ANodeFeedingOnlyAnOutputRunsRightAfterItsInput) {
  GraphBuilder b(Registry());
  Value x = *b.Input("data", F32({2, 3}));
  Value first = *b.Relu(x, 0, "first");
  Value second = *b.Relu(first, 0, "second");
  Value third = *b.Relu(second, 0, "third");
  ASSERT_TRUE(b.Output("out", third).ok());
  Value early = *b.Relu(first, 0, "early_sink");  // created last, reads `first`
  ASSERT_TRUE(b.Output("early", early).ok());
  auto g = b.Finish();
  auto order = g->TopologicalOrder();
  ASSERT_TRUE(order.ok()) << order.status();
  std::vector<std::string> names;
  for (const Node* n : *order) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"data", "first", "early_sink", "second", "third"}));
}

TEST(GraphTest, CloneIsIndependentAndEqual) {
  auto g = SmallGraph();
  auto copy = g->Clone();
  EXPECT_EQ(PrintGraph(*copy), PrintGraph(*g));
  copy->RemoveDeadNodes();
  ASSERT_TRUE(
      copy->ReplaceAllUsesWith(copy->FindNode("relu")->output(0), copy->FindNode("conv")->output(0))
          .ok());
  EXPECT_NE(PrintGraph(*copy), PrintGraph(*g));
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

}  // namespace
}  // namespace kiln
