// Shape inference of every op, table-driven: each row is an op, its input shapes, attributes,
// and either the expected output shapes or a fragment of the expected error.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ops/all_ops.h"
#include "ops/pooling_params.h"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

struct ShapeCase {
  std::string label;
  std::string op;
  std::vector<Dims> inputs;
  AttrMap attrs;
  std::vector<Dims> outputs;  // Empty: an error is expected.
  std::string error;          // Fragment of the expected error message.
};

std::string Name(const ::testing::TestParamInfo<ShapeCase>& info) { return info.param.label; }

class ShapeInferenceTest : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(ShapeInferenceTest, Infers) {
  const ShapeCase& c = GetParam();
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto t = TensorType::Create(DataType::kF32, c.inputs[i]);
    ASSERT_TRUE(t.ok());
    inputs.push_back(*b.Input(absl::StrCat("in", i), *t));
  }
  auto out = b.Op(c.op, inputs, c.attrs, "node");
  if (c.outputs.empty()) {
    ASSERT_FALSE(out.ok()) << c.label << " should fail";
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(c.error), std::string::npos)
        << "got: " << out.status().message() << "\nwanted: " << c.error;
    EXPECT_NE(out.status().message().find("node 'node'"), std::string::npos);
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), c.outputs.size());
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    EXPECT_EQ((*out)[i].type().dims(), c.outputs[i]) << "output " << i;
  }
}

AttrMap Pool(Ints kernel, Ints stride, Ints pad, const char* rounding = "ceil",
             const char* mode = "max") {
  return {{"kernel", kernel},
          {"stride", stride},
          {"pad", pad},
          {"rounding", std::string(rounding)},
          {"mode", std::string(mode)}};
}

// One case per line reads better than the formatter's layout.
// clang-format off
const ShapeCase kCases[] = {
    // Convolution: floor((in + 2p - (d(k-1)+1)) / s) + 1.
    {"ConvAlexNetConv1", "Convolution", {{10, 3, 227, 227}, {96, 3, 11, 11}, {96}},
     {{"stride", Ints{4}}}, {{10, 96, 55, 55}}},
    {"ConvSamePad", "Convolution", {{1, 3, 7, 9}, {8, 3, 3, 3}}, {{"pad", Ints{1}}}, {{1, 8, 7, 9}}},
    {"ConvPerDimAttrs", "Convolution", {{1, 3, 10, 12}, {8, 3, 3, 5}},
     {{"stride", Ints{1, 2}}, {"pad", Ints{0, 2}}}, {{1, 8, 8, 6}}},
    {"ConvDilation", "Convolution", {{1, 2, 9, 9}, {4, 2, 3, 3}}, {{"dilation", Ints{2}}},
     {{1, 4, 5, 5}}},
    {"ConvFloorsRemainder", "Convolution", {{1, 1, 8, 8}, {1, 1, 3, 3}}, {{"stride", Ints{2}}},
     {{1, 1, 3, 3}}},
    {"ConvGroups", "Convolution", {{2, 8, 5, 5}, {12, 2, 3, 3}}, {{"group", int64_t{4}}},
     {{2, 12, 3, 3}}},
    {"ConvDepthwise", "Convolution", {{1, 32, 14, 14}, {32, 1, 3, 3}},
     {{"group", int64_t{32}}, {"pad", Ints{1}}}, {{1, 32, 14, 14}}},
    {"Conv1d", "Convolution", {{2, 4, 20}, {6, 4, 5}}, {{"stride", Ints{3}}}, {{2, 6, 6}}},
    {"Conv3d", "Convolution", {{1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}}, {{"pad", Ints{1, 0, 1}}},
     {{1, 3, 5, 4, 7}}},
    {"ConvTrueConvolutionMode", "Convolution", {{1, 1, 4, 4}, {1, 1, 2, 2}},
     {{"mode", std::string("convolution")}}, {{1, 1, 3, 3}}},
    {"ConvBadGroupChannels", "Convolution", {{1, 6, 5, 5}, {4, 2, 3, 3}}, {{"group", int64_t{4}}},
     {}, "group 4 must divide input channels 6"},
    {"ConvFilterChannelMismatch", "Convolution", {{1, 3, 5, 5}, {4, 2, 3, 3}}, {}, {},
     "channels per group"},
    {"ConvFilterTooLarge", "Convolution", {{1, 3, 5, 5}, {4, 3, 7, 7}}, {}, {},
     "smaller than the dilated filter"},
    {"ConvBiasShape", "Convolution", {{1, 3, 5, 5}, {4, 3, 3, 3}, {5}}, {}, {},
     "bias must have shape [4]"},
    {"ConvBadAttrCount", "Convolution", {{1, 3, 5, 5}, {4, 3, 3, 3}}, {{"pad", Ints{1, 1, 1}}},
     {}, "pad has 3 values"},
    {"ConvZeroStride", "Convolution", {{1, 3, 5, 5}, {4, 3, 3, 3}}, {{"stride", Ints{0}}}, {},
     "stride must be >= 1"},
    {"ConvBadMode", "Convolution", {{1, 3, 5, 5}, {4, 3, 3, 3}}, {{"mode", std::string("fft")}},
     {}, "mode must be"},
    {"ConvRank2Input", "Convolution", {{3, 5}, {4, 3}}, {}, {}, "1 to 3 spatial dims"},
    // Deconvolution: s(in-1) + d(k-1)+1 - 2p.
    {"DeconvFcnUpsample", "Deconvolution", {{1, 21, 16, 16}, {21, 21, 4, 4}},
     {{"stride", Ints{2}}}, {{1, 21, 34, 34}}},
    {"DeconvPadded", "Deconvolution", {{1, 4, 5, 5}, {4, 3, 3, 3}},
     {{"stride", Ints{2}}, {"pad", Ints{1}}}, {{1, 3, 9, 9}}},
    {"DeconvGroups", "Deconvolution", {{1, 4, 3, 3}, {4, 2, 2, 2}}, {{"group", int64_t{2}}},
     {{1, 4, 4, 4}}},
    {"DeconvWrongFilter", "Deconvolution", {{1, 4, 3, 3}, {3, 2, 2, 2}}, {}, {},
     "must start with the input channels 4"},
    // Pooling: Caffe's ceil rounding, floor rounding, the clip rule, global.
    {"PoolGoogLeNetCeil", "Pooling", {{1, 64, 112, 112}}, Pool({3}, {2}, {0}),
     {{1, 64, 56, 56}}},
    {"PoolGoogLeNetFloor", "Pooling", {{1, 64, 112, 112}}, Pool({3}, {2}, {0}, "floor"),
     {{1, 64, 55, 55}}},
    {"PoolCifarCeil", "Pooling", {{1, 32, 32, 32}}, Pool({3}, {2}, {0}), {{1, 32, 16, 16}}},
    {"PoolCifarFloor", "Pooling", {{1, 32, 32, 32}}, Pool({3}, {2}, {0}, "floor"),
     {{1, 32, 15, 15}}},
    {"PoolAlexNet", "Pooling", {{1, 96, 55, 55}}, Pool({3}, {2}, {0}), {{1, 96, 27, 27}}},
    {"PoolClipRuleDropsWindowInPadding", "Pooling", {{1, 1, 5, 5}},
     Pool({2}, {2}, {1}), {{1, 1, 3, 3}}},
    {"PoolResNetCaffe", "Pooling", {{1, 64, 112, 112}}, Pool({3}, {2}, {0}),
     {{1, 64, 56, 56}}},
    {"PoolPaddedCeilKeepsLastWindow", "Pooling", {{1, 64, 112, 112}}, Pool({3}, {2}, {1}),
     {{1, 64, 57, 57}}},
    {"PoolPaddedCeilOverhang", "Pooling", {{1, 1, 6, 6}}, Pool({3}, {2}, {1}), {{1, 1, 4, 4}}},
    {"PoolGlobal", "Pooling", {{2, 1024, 7, 7}}, {{"global", true}, {"mode", std::string("avg")}},
     {{2, 1024, 1, 1}}},
    {"PoolRectangular", "Pooling", {{1, 3, 9, 12}}, Pool({3, 2}, {2, 3}, {0}), {{1, 3, 4, 5}}},
    {"Pool1d", "Pooling", {{1, 3, 9}}, Pool({3}, {2}, {0}), {{1, 3, 4}}},
    {"Pool3d", "Pooling", {{1, 3, 4, 6, 8}}, Pool({2}, {2}, {0}), {{1, 3, 2, 3, 4}}},
    {"PoolPadNotBelowKernel", "Pooling", {{1, 1, 5, 5}}, Pool({2}, {1}, {2}), {},
     "must be smaller than kernel"},
    {"PoolMissingKernel", "Pooling", {{1, 1, 5, 5}}, {}, {}, "kernel is required"},
    {"PoolGlobalWithPad", "Pooling", {{1, 1, 5, 5}}, {{"global", true}, {"pad", Ints{1}}}, {},
     "global pooling needs pad 0"},
    {"PoolBadMode", "Pooling", {{1, 1, 5, 5}}, Pool({2}, {1}, {0}, "ceil", "stochastic"), {},
     "mode must be"},
    {"PoolBadRounding", "Pooling", {{1, 1, 5, 5}}, Pool({2}, {1}, {0}, "round"), {},
     "rounding must be"},
    // LRN and BatchNorm.
    {"LrnAcross", "LRN", {{2, 8, 5, 5}}, {{"local_size", int64_t{5}}}, {{2, 8, 5, 5}}},
    {"LrnWithin", "LRN", {{2, 8, 5, 5}}, {{"region", std::string("within_channel")}},
     {{2, 8, 5, 5}}},
    {"LrnEvenSize", "LRN", {{2, 8, 5, 5}}, {{"local_size", int64_t{4}}}, {}, "must be odd"},
    {"LrnWithinNeeds4d", "LRN", {{2, 8, 5}}, {{"region", std::string("within_channel")}}, {},
     "4-d"},
    {"BatchNormSpatial", "BatchNorm", {{2, 4, 3, 3}, {4}, {4}, {1}}, {}, {{2, 4, 3, 3}}},
    {"BatchNormPerActivation", "BatchNorm", {{2, 4, 3}, {4, 3}, {4, 3}},
     {{"mode", std::string("per_activation")}}, {{2, 4, 3}}},
    {"BatchNormWrongStats", "BatchNorm", {{2, 4, 3, 3}, {3}, {4}}, {}, {},
     "mean must have shape [4]"},
    {"BatchNormBadScaleFactor", "BatchNorm", {{2, 4, 3, 3}, {4}, {4}, {2}}, {}, {},
     "scale_factor must have shape [1]"},
    {"BatchNormBadEps", "BatchNorm", {{2, 4}, {4}, {4}}, {{"eps", 0.0}}, {}, "eps must be > 0"},
    // Recurrent layers and Embed.
    {"RnnLstm", "RNN", {{5, 3, 4}, {24, 4}, {24, 6}, {24}, {24}},
     {{"hidden_size", int64_t{6}}}, {{5, 3, 6}, {3, 6}, {3, 6}}},
    {"RnnGruStateCont", "RNN", {{5, 3, 4}, {18, 4}, {18, 6}, {18}, {5, 3}, {3, 6}},
     {{"hidden_size", int64_t{6}}, {"cell", std::string("gru")}, {"bias", std::string("input")},
      {"has_cont", true}, {"has_initial_state", true}},
     {{5, 3, 6}, {3, 6}}},
    {"RnnWrongWhh", "RNN", {{5, 3, 4}, {24, 4}, {24, 5}}, {{"hidden_size", int64_t{6}},
     {"bias", std::string("none")}}, {}, "w_hh"},
    {"RnnMissingBias", "RNN", {{5, 3, 4}, {24, 4}, {24, 6}}, {{"hidden_size", int64_t{6}}}, {},
     "need 5 inputs"},
    {"RnnBidirectionalState", "RNN",
     {{5, 3, 4}, {18, 4}, {18, 6}, {18, 4}, {18, 6}, {2, 3, 6}},
     {{"hidden_size", int64_t{6}}, {"cell", std::string("gru")}, {"bias", std::string("none")},
      {"has_initial_state", true}, {"bidirectional", true}},
     {{5, 3, 12}, {2, 3, 6}}},
    {"RnnBidirectionalOneDirectionState", "RNN",
     {{5, 3, 4}, {18, 4}, {18, 6}, {18, 4}, {18, 6}, {3, 6}},
     {{"hidden_size", int64_t{6}}, {"cell", std::string("gru")}, {"bias", std::string("none")},
      {"has_initial_state", true}, {"bidirectional", true}},
     {}, "h0"},
    {"RnnIfogNotLstm", "RNN", {{5, 3, 4}, {6, 4}, {6, 6}},
     {{"hidden_size", int64_t{6}}, {"cell", std::string("rnn_tanh")},
      {"bias", std::string("none")}, {"gate_order", std::string("ifog")}},
     {}, "gate_order"},
    {"RnnNot3d", "RNN", {{5, 4}, {24, 4}, {24, 6}}, {{"hidden_size", int64_t{6}},
     {"bias", std::string("none")}}, {}, "[T, N, I]"},
    {"EmbedWithBias", "Embed", {{2, 3}, {10, 4}, {4}}, {}, {{2, 3, 4}}},
    {"TileAxis1", "Tile", {{2, 3, 4}}, {{"tiles", int64_t{5}}}, {{2, 15, 4}}},
    {"ChannelShuffle", "ChannelShuffle", {{2, 6, 4, 4}}, {{"group", int64_t{3}}}, {{2, 6, 4, 4}}},
    {"ChannelShuffleNotDividing", "ChannelShuffle", {{2, 6, 4}}, {{"group", int64_t{4}}}, {},
     "divide"},
    {"ReductionAxis1", "Reduction", {{2, 3, 4}}, {{"axis", int64_t{1}}}, {{2}}},
    {"ReductionAll", "Reduction", {{2, 3}}, {}, {{}}},
    {"ReductionBadOp", "Reduction", {{2, 3}}, {{"operation", std::string("max")}}, {}, "operation"},
    {"TileZero", "Tile", {{2, 3}}, {{"tiles", int64_t{0}}}, {}, "tiles"},
    {"EmbedWrongBias", "Embed", {{2, 3}, {10, 4}, {5}}, {}, {}, "bias"},
    // ArgMax: Caffe's top shapes, with an axis or each item flattened (padded to rank 3).
    {"ArgMaxFlat4d", "ArgMax", {{2, 3, 4, 5}}, {{"top_k", int64_t{3}}}, {{2, 1, 3, 1}}},
    {"ArgMaxFlatValues2d", "ArgMax", {{4, 10}}, {{"out_max_val", true}}, {{4, 2, 1}}},
    {"ArgMaxLastAxis", "ArgMax", {{2, 3, 4}}, {{"axis", Ints{-1}}, {"top_k", int64_t{2}}},
     {{2, 3, 2}}},
    {"ArgMaxAxisTopKTooLarge", "ArgMax", {{2, 3, 4}}, {{"axis", Ints{1}}, {"top_k", int64_t{4}}},
     {}, "top_k 4 must be in [1, 3] (the size of axis 1)"},
    {"ArgMaxFlatTopKTooLarge", "ArgMax", {{2, 3, 4}}, {{"top_k", int64_t{13}}}, {},
     "top_k 13 must be in [1, 12]"},
    {"ArgMaxTopKZero", "ArgMax", {{2, 5}}, {{"top_k", int64_t{0}}}, {}, "top_k 0 must be in"},
    {"ArgMaxBadAxis", "ArgMax", {{2, 3}}, {{"axis", Ints{2}}}, {}, "axis 2 is out of range"},
    {"ArgMaxTwoAxes", "ArgMax", {{2, 3}}, {{"axis", Ints{0, 1}}}, {}, "at most one value"},
    {"ArgMaxScalar", "ArgMax", {{}}, {}, {}, "at least one axis"},
    // LSTMUnit: c_prev [T, N, D], gates [T, N, 4D], cont [T, N] -> c, h.
    {"LSTMUnit", "LSTMUnit", {{1, 3, 4}, {1, 3, 16}, {1, 3}}, {}, {{1, 3, 4}, {1, 3, 4}}},
    {"LSTMUnitGates", "LSTMUnit", {{1, 3, 4}, {1, 3, 12}, {1, 3}}, {}, {},
     "x (the gates i, f, o, g) must have shape [1,3,16]"},
    {"LSTMUnitCont", "LSTMUnit", {{1, 3, 4}, {1, 3, 16}, {1, 2}}, {}, {},
     "cont must have shape [1,3]"},
    // CTCLoss: activations [T, N, C], labels [N, L], input and label lengths [N] -> a scalar.
    {"CtcLoss", "CTCLoss", {{7, 3, 5}, {3, 4}, {3}, {3}}, {}, {{}}},
    {"CtcLossSumBlankLast", "CTCLoss", {{7, 3, 5}, {3, 1}, {3}, {3}},
     {{"reduction", std::string("sum")}, {"blank", int64_t{4}}}, {{}}},
    {"CtcLossGradient", "CTCLossGradient", {{7, 3, 5}, {3, 4}, {3}, {3}},
     {{"loss_weight", 0.5}}, {{7, 3, 5}}},
    {"CtcLossNone", "CTCLoss", {{7, 3, 5}, {3, 4}, {3}, {3}},
     {{"reduction", std::string("none")}}, {}, "reduction must be mean or sum"},
    {"CtcLossBlankOutside", "CTCLoss", {{7, 3, 5}, {3, 4}, {3}, {3}},
     {{"blank", int64_t{5}}}, {}, "blank 5 is outside [0, 5)"},
    {"CtcLossNot3d", "CTCLoss", {{7, 15}, {3, 4}, {3}, {3}}, {}, {}, "[T, N, C]"},
    {"CtcLossLabelsBatch", "CTCLoss", {{7, 3, 5}, {2, 4}, {3}, {3}}, {}, {},
     "labels must be [N, L] with N = 3"},
    {"CtcLossLabelsFlat", "CTCLoss", {{7, 3, 5}, {12}, {3}, {3}}, {}, {}, "labels must be [N, L]"},
    {"CtcLossInputLengths", "CTCLoss", {{7, 3, 5}, {3, 4}, {2}, {3}}, {}, {},
     "input_lengths must have shape [3]"},
    {"CtcLossLabelLengths", "CTCLossGradient", {{7, 3, 5}, {3, 4}, {3}, {3, 1}}, {}, {},
     "label_lengths must have shape [3]"},
    {"LSTMUnitNot3d", "LSTMUnit", {{3, 4}, {3, 16}, {3}}, {}, {}, "c_prev must be [T, N, D]"},
    {"LSTMUnitNoCont", "LSTMUnit", {{1, 3, 4}, {1, 3, 16}}, {}, {}, "takes 3 inputs, got 2"},
    {"LSTMUnitGradient", "LSTMUnitGradient", {{1, 3, 4}, {1, 3, 16}, {1, 3}, {1, 3, 4}, {1, 3, 4}},
     {}, {{1, 3, 4}, {1, 3, 16}}},
    {"LSTMUnitGradientDhOnly", "LSTMUnitGradient", {{2, 3, 4}, {2, 3, 16}, {2, 3}, {2, 3, 4}},
     {{"has_dc", false}}, {{2, 3, 4}, {2, 3, 16}}},
    {"LSTMUnitGradientCount", "LSTMUnitGradient", {{1, 3, 4}, {1, 3, 16}, {1, 3}, {1, 3, 4}}, {},
     {}, "give 5 inputs, got 4"},
    {"LSTMUnitGradientWrongDh", "LSTMUnitGradient",
     {{1, 3, 4}, {1, 3, 16}, {1, 3}, {1, 3, 4}, {1, 3, 5}}, {}, {}, "dh must have shape [1,3,4]"},
    {"LSTMUnitGradientNoGrads", "LSTMUnitGradient", {{1, 3, 4}, {1, 3, 16}, {1, 3}, {1, 3, 4}},
     {{"has_dc", false}, {"has_dh", false}}, {}, "needs dc or dh"},
    // Scale, Bias, activations.
    {"ScaleChannel", "Scale", {{2, 3, 4, 4}, {3}, {3}}, {}, {{2, 3, 4, 4}}},
    {"ScaleTwoAxes", "Scale", {{2, 3, 4, 4}, {3, 4}}, {{"num_axes", int64_t{2}}},
     {{2, 3, 4, 4}}},
    {"ScaleToEnd", "Scale", {{2, 3, 4}, {3, 4}}, {{"num_axes", int64_t{-1}}}, {{2, 3, 4}}},
    {"ScaleScalar", "Scale", {{2, 3}, {1}}, {{"num_axes", int64_t{0}}}, {{2, 3}}},
    {"ScaleWrongShape", "Scale", {{2, 3, 4, 4}, {4}}, {}, {}, "must equal input dims [3]"},
    {"BiasAxis2", "Bias", {{2, 3, 4}, {4}}, {{"axis", int64_t{2}}}, {{2, 3, 4}}},
    {"ReLU", "ReLU", {{3, 5}}, {{"negative_slope", 0.1}}, {{3, 5}}},
    {"PReLU", "PReLU", {{2, 3, 4}, {3}}, {}, {{2, 3, 4}}},
    {"PReLUShared", "PReLU", {{2, 3, 4}, {1}}, {{"channel_shared", true}}, {{2, 3, 4}}},
    {"PReLUWrongSlope", "PReLU", {{2, 3, 4}, {2}}, {}, {}, "slope must have shape [3]"},
    {"Sigmoid", "Sigmoid", {{7}}, {}, {{7}}},
    {"TanH", "TanH", {{1, 2, 3}}, {}, {{1, 2, 3}}},
    {"ELU", "ELU", {{4, 4}}, {{"alpha", 0.5}}, {{4, 4}}},
    {"ClippedReLU", "ClippedReLU", {{4}}, {}, {{4}}},
    {"ClippedReLUBadCeiling", "ClippedReLU", {{4}}, {{"ceiling", -1.0}}, {}, "ceiling must be > 0"},
    {"Power", "Power", {{4}}, {{"power", 2.0}}, {{4}}},
    {"AbsVal", "AbsVal", {{4}}, {}, {{4}}},
    {"Dropout", "Dropout", {{4, 5}}, {{"ratio", 0.3}}, {{4, 5}}},
    {"DropoutBadRatio", "Dropout", {{4}}, {{"ratio", 1.0}}, {}, "ratio must be in [0, 1)"},
    // Softmax and InnerProduct.
    {"Softmax", "Softmax", {{2, 10}}, {}, {{2, 10}}},
    {"SoftmaxNegativeAxis", "Softmax", {{2, 3, 4}}, {{"axis", int64_t{-1}}}, {{2, 3, 4}}},
    {"SoftmaxBadAxis", "Softmax", {{2, 3}}, {{"axis", int64_t{2}}}, {}, "axis 2 is out of range"},
    {"InnerProductFlattensFromAxis", "InnerProduct", {{2, 16, 5, 5}, {500, 400}, {500}}, {},
     {{2, 500}}},
    {"InnerProductAxis2", "InnerProduct", {{2, 3, 4}, {6, 4}}, {{"axis", int64_t{2}}},
     {{2, 3, 6}}},
    {"InnerProductTranspose", "InnerProduct", {{2, 8}, {8, 3}}, {{"transpose", true}}, {{2, 3}}},
    {"InnerProductWrongK", "InnerProduct", {{2, 8}, {3, 7}}, {}, {}, "needs 8 inputs per output"},
    // Data movement.
    {"Concat", "Concat", {{2, 3, 4}, {2, 5, 4}}, {}, {{2, 8, 4}}},
    {"ConcatAxis0", "Concat", {{2, 3}, {1, 3}, {4, 3}}, {{"axis", int64_t{0}}}, {{7, 3}}},
    {"ConcatMismatch", "Concat", {{2, 3, 4}, {2, 5, 5}}, {}, {}, "does not match input 0"},
    {"SlicePoints", "Slice", {{2, 15, 3}}, {{"slice_points", Ints{4, 10}}},
     {{2, 4, 3}, {2, 6, 3}, {2, 5, 3}}},
    {"SliceEqual", "Slice", {{2, 6}}, {{"num_outputs", int64_t{3}}}, {{2, 2}, {2, 2}, {2, 2}}},
    {"SliceUneven", "Slice", {{2, 7}}, {{"num_outputs", int64_t{3}}}, {},
     "does not split into 3 equal parts"},
    {"SliceBadPoints", "Slice", {{2, 7}}, {{"slice_points", Ints{5, 3}}}, {},
     "must increase strictly"},
    {"Split", "Split", {{2, 3}}, {{"num_outputs", int64_t{3}}}, {{2, 3}, {2, 3}, {2, 3}}},
    {"Flatten", "Flatten", {{2, 3, 4, 5}}, {}, {{2, 60}}},
    {"FlattenRange", "Flatten", {{2, 3, 4, 5}}, {{"axis", int64_t{1}}, {"end_axis", int64_t{2}}},
     {{2, 12, 5}}},
    {"ReshapeInfer", "Reshape", {{2, 3, 4}}, {{"shape", Ints{0, -1}}}, {{2, 12}}},
    {"ReshapeAxisRange", "Reshape", {{2, 12, 5}}, {{"shape", Ints{3, 4}}, {"axis", int64_t{1}},
                                                   {"num_axes", int64_t{1}}},
     {{2, 3, 4, 5}}},
    {"ReshapeCountMismatch", "Reshape", {{2, 3, 4}}, {{"shape", Ints{5, 5}}}, {},
     "holds 25 elements where 24 are replaced"},
    {"ReshapeTwoInferred", "Reshape", {{2, 3, 4}}, {{"shape", Ints{-1, -1}}}, {},
     "more than one -1"},
    {"CropFcn", "Crop", {{1, 21, 44, 44}, {1, 3, 32, 32}}, {{"offset", Ints{5}}},
     {{1, 21, 32, 32}}},
    {"CropPerDimOffsets", "Crop", {{1, 3, 10, 10}, {1, 3, 4, 6}}, {{"offset", Ints{1, 2}}},
     {{1, 3, 4, 6}}},
    {"CropOutOfRange", "Crop", {{1, 3, 10, 10}, {1, 3, 8, 8}}, {{"offset", Ints{3}}}, {},
     "exceeds input size 10"},
    {"EltwiseSum", "Eltwise", {{2, 3}, {2, 3}, {2, 3}}, {{"coeffs", std::vector<double>{1, -1, 2}}},
     {{2, 3}}},
    {"EltwiseShapeMismatch", "Eltwise", {{2, 3}, {3, 2}}, {}, {}, "differs from input 0"},
    {"EltwiseCoeffsWithMax", "Eltwise", {{2}, {2}},
     {{"operation", std::string("max")}, {"coeffs", std::vector<double>{1, 1}}}, {},
     "coeffs are only allowed with sum"},
    // Losses: scalar outputs.
    {"SoftmaxWithLoss", "SoftmaxWithLoss", {{8, 10}, {8}}, {}, {{}}},
    {"SoftmaxWithLossSpatial", "SoftmaxWithLoss", {{2, 5, 3, 3}, {2, 1, 3, 3}}, {}, {{}}},
    {"SoftmaxWithLossBadLabels", "SoftmaxWithLoss", {{8, 10}, {7}}, {}, {}, "must hold 8 entries"},
    {"Accuracy", "Accuracy", {{8, 10}, {8}}, {{"top_k", int64_t{5}}}, {{}}},
    {"AccuracyBadTopK", "Accuracy", {{8, 10}, {8}}, {{"top_k", int64_t{11}}}, {},
     "top_k 11 must be in [1, 10]"},
    {"EuclideanLoss", "EuclideanLoss", {{4, 3}, {4, 3}}, {}, {{}}},
    {"EuclideanLossMismatch", "EuclideanLoss", {{4, 3}, {4, 2}}, {}, {}, "differ in element count"},
    {"SigmoidCrossEntropyLoss", "SigmoidCrossEntropyLoss", {{4, 784}, {4, 1, 28, 28}}, {}, {{}}},
    {"SigmoidCrossEntropyLossCount", "SigmoidCrossEntropyLoss", {{4, 784}, {4, 783}}, {}, {},
     "as many elements as logits"},
    {"ContrastiveLoss", "ContrastiveLoss", {{8, 2}, {8, 2}, {8}}, {}, {{}}},
    {"ContrastiveLossShapes", "ContrastiveLoss", {{8, 2}, {8, 3}, {8}}, {}, {}, "differ in shape"},
    {"ContrastiveLossSimilar", "ContrastiveLoss", {{8, 2}, {8, 2}, {7}}, {}, {}, "one entry per row"},
    // Sizes from a hostile file: errors, never an abort or a wrapped value.
    {"ConvHugePadIsAnError", "Convolution", {{1, 1, 10, 10}, {1, 1, 3, 3}},
     {{"pad", Ints{2000000000}}}, {}, "overflow"},
    {"ConvHugeDilationIsAnError", "Convolution", {{1, 1, 10, 10}, {1, 1, 3, 3}},
     {{"dilation", Ints{int64_t{1} << 62}}}, {}, "overflow 64-bit sizes"},
    {"ConvHugeAsymmetricPadIsAnError", "Convolution", {{1, 1, 10, 10}, {1, 1, 3, 3}},
     {{"pad", Ints{INT64_MAX}}, {"pad_end", Ints{INT64_MAX}}}, {}, "overflow 64-bit sizes"},
    {"DeconvHugeStrideIsAnError", "Deconvolution", {{1, 1, 227, 227}, {1, 1, 3, 3}},
     {{"stride", Ints{4000000000}}}, {}, "overflow"},
    {"DeconvStrideOverflowIsAnError", "Deconvolution", {{1, 1, 10, 10}, {1, 1, 3, 3}},
     {{"stride", Ints{int64_t{1} << 61}}}, {}, "overflow 64-bit sizes"},
    {"PoolHugeKernelAndPadIsAnError", "Pooling", {{1, 1, 5, 5}},
     Pool({INT64_MAX}, {1}, {INT64_MAX - 1}), {}, "overflows 64-bit sizes"},
    {"PoolHugeStrideIsAnError", "Pooling", {{1, 1, 5, 5}}, Pool({3}, {INT64_MAX}, {1}), {},
     "overflows 64-bit sizes"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(AllOps, ShapeInferenceTest, ::testing::ValuesIn(kCases), Name);

TEST(PooledSizeTest, MatchesCaffeFormulaExhaustively) {
  // Independent restatement of Caffe's rule over a grid of sizes.
  for (int64_t in = 1; in <= 20; ++in) {
    for (int64_t k = 1; k <= 5; ++k) {
      for (int64_t s = 1; s <= 4; ++s) {
        for (int64_t p = 0; p < k; ++p) {
          if (in + 2 * p < k) continue;
          const double exact = static_cast<double>(in + 2 * p - k) / s;
          int64_t ceil_out = static_cast<int64_t>(std::ceil(exact)) + 1;
          if (p > 0 && (ceil_out - 1) * s >= in + p) --ceil_out;
          const int64_t floor_out = static_cast<int64_t>(std::floor(exact)) + 1;
          EXPECT_EQ(*PooledSize(in, k, s, p, true, p > 0), ceil_out);
          EXPECT_EQ(*PooledSize(in, k, s, p, false, p > 0), floor_out);
        }
      }
    }
  }
}

TEST(OpRegistryTest, EveryOpHasInferenceAndASummary) {
  const std::vector<std::string> expected = {"AbsVal",
                                             "Accuracy",
                                             "ActivationGradient",
                                             "AffineBatchNorm",
                                             "AffineBatchNormGradient",
                                             "ArgMax",
                                             "BatchNorm",
                                             "BatchNormGradient",
                                             "Bias",
                                             "BiasGradient",
                                             "CTCLoss",
                                             "CTCLossGradient",
                                             "ChannelShuffle",
                                             "ClippedReLU",
                                             "Concat",
                                             "Constant",
                                             "ContrastiveLoss",
                                             "ContrastiveLossGradient",
                                             "Convert",
                                             "Convolution",
                                             "ConvolutionBackwardData",
                                             "ConvolutionBackwardFilter",
                                             "Crop",
                                             "CropGradient",
                                             "Deconvolution",
                                             "Dropout",
                                             "DropoutGradient",
                                             "ELU",
                                             "Eltwise",
                                             "EltwiseMaxGradient",
                                             "Embed",
                                             "EmbedGradient",
                                             "EuclideanLoss",
                                             "EuclideanLossGradient",
                                             "Flatten",
                                             "InnerProduct",
                                             "InnerProductBackwardData",
                                             "InnerProductBackwardFilter",
                                             "LRN",
                                             "LRNGradient",
                                             "LSTMUnit",
                                             "LSTMUnitGradient",
                                             "PReLU",
                                             "PReLUGradient",
                                             "Parameter",
                                             "Pooling",
                                             "PoolingGradient",
                                             "Power",
                                             "RNN",
                                             "RNNGradient",
                                             "ReLU",
                                             "Reduction",
                                             "ReductionGradient",
                                             "Reshape",
                                             "Scale",
                                             "ScaleParamGradient",
                                             "Sigmoid",
                                             "SigmoidCrossEntropyLoss",
                                             "SigmoidCrossEntropyLossGradient",
                                             "Slice",
                                             "Softmax",
                                             "SoftmaxGradient",
                                             "SoftmaxWithLoss",
                                             "SoftmaxWithLossGradient",
                                             "Split",
                                             "TanH",
                                             "Tile",
                                             "TileGradient"};
  std::vector<std::string> names;
  for (const OpDef* d : DefaultOpRegistry().All()) {
    names.push_back(d->name);
    EXPECT_TRUE(static_cast<bool>(d->infer_types)) << d->name;
    EXPECT_FALSE(d->summary.empty()) << d->name;
    // Every differentiable op can be trained through: ops/gradients/ gave it a builder.
    EXPECT_EQ(d->differentiable, static_cast<bool>(d->gradient)) << d->name;
  }
  EXPECT_EQ(names, expected);
}

TEST(OpRegistryTest, DuplicateRegistrationFails) {
  OpRegistry r;
  ASSERT_TRUE(RegisterActivationOps(r).ok());
  EXPECT_EQ(RegisterActivationOps(r).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Convert changes dtype and/or memory order, never dims; bad requests name the attribute.
TEST(ConvertInferenceTest, DtypeAndLayout) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", *TensorType::Create(DataType::kF32, {2, 3, 4, 5}));
  auto to_f16 = b.Op("Convert", {x}, {{"dtype", std::string("f16")}}, "a");
  ASSERT_TRUE(to_f16.ok()) << to_f16.status();
  EXPECT_EQ((*to_f16)[0].type().ToString(), "f16[2,3,4,5]");
  auto nhwc = b.Op("Convert", {x},
                   {{"dtype", std::string("bf16")}, {"layout", std::string("channels_last")}}, "b");
  ASSERT_TRUE(nhwc.ok()) << nhwc.status();
  EXPECT_EQ((*nhwc)[0].type().dtype(), DataType::kBF16);
  EXPECT_TRUE((*nhwc)[0].type().IsChannelsLast());
  auto back = b.Op("Convert", {(*nhwc)[0]}, {{"layout", std::string("row_major")}}, "c");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].type().ToString(), "bf16[2,3,4,5]");
  Value flat = *b.Input("flat", *TensorType::Create(DataType::kF32, {6}));
  auto bad_layout = b.Op("Convert", {flat}, {{"layout", std::string("channels_last")}}, "d");
  EXPECT_FALSE(bad_layout.ok());
  EXPECT_NE(bad_layout.status().message().find("channels_last"), std::string::npos);
  auto bad_dtype = b.Op("Convert", {flat}, {{"dtype", std::string("i32")}}, "e");
  EXPECT_FALSE(bad_dtype.ok());
}

}  // namespace
}  // namespace kiln
