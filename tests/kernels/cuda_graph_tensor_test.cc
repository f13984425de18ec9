// The graph's CUDA kernels of the data-movement, Eltwise, Softmax and loss families against the
// reference: f32, f16 and bf16, NCHW and NHWC, fresh random inputs, poisoned buffers. The GPU
// cases skip without a device; the registry test runs everywhere.
#include <cstdio>

#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/device.h"
#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace {

using testing::CaseInput;
using testing::GraphKernelCase;
using Ints = std::vector<int64_t>;

CaseInput Data(std::vector<int64_t> dims, float lo = -1, float hi = 1) {
  return testing::DataInput(std::move(dims), lo, hi);
}
CaseInput Labels(std::vector<int64_t> dims, int64_t classes, int64_t ignored = -1) {
  return testing::LabelInput(std::move(dims), classes, ignored);
}

// Losses sum hundreds of 16-bit terms: their rounding adds up (a loss of N terms rounded per
// term differs by about sqrt(N) units), hence the looser scale where marked.
const std::vector<GraphKernelCase>& Cases() {
  static const auto* cases = new std::vector<GraphKernelCase>{
      {"Softmax", "Softmax", {Data({3, 17, 5})}, {}},
      {"SoftmaxChannels4d", "Softmax", {Data({2, 7, 3, 5})}, {}},
      {"LogSoftmaxLastAxis", "Softmax", {Data({4, 33})}, {{"log", true}, {"axis", int64_t{-1}}}},
      {"Concat", "Concat", {Data({2, 3, 5, 7}), Data({2, 5, 5, 7}), Data({2, 1, 5, 7})}, {}},
      // Parts whose rows (C x H x W of one image) are multiples of 4 elements: copied 4 at a time.
      {"ConcatVectorRows", "Concat", {Data({2, 8, 7, 4}), Data({2, 4, 7, 4})}, {}},
      {"ConcatAxis0", "Concat", {Data({2, 3, 4, 5}), Data({1, 3, 4, 5})}, {{"axis", int64_t{0}}}},
      {"SlicePoints", "Slice", {Data({2, 9, 5, 7})}, {{"slice_points", Ints{2, 5}}}},
      {"SliceEqual",
       "Slice",
       {Data({6, 4, 3, 5})},
       {{"axis", int64_t{0}}, {"num_outputs", int64_t{3}}}},
      {"Split", "Split", {Data({2, 3, 5, 7})}, {{"num_outputs", int64_t{3}}}},
      {"Crop", "Crop", {Data({2, 3, 11, 13}), Data({2, 3, 6, 7})}, {{"offset", Ints{2, 3}}}},
      {"CropFromAxis1",
       "Crop",
       {Data({2, 5, 9, 9}), Data({2, 3, 4, 4})},
       {{"axis", int64_t{1}}, {"offset", Ints{1}}}},
      // The Crop that passes/fold_convert_into_crop.cc gives a Convert: crop and convert at once.
      {"CropToF16",
       "Crop",
       {Data({2, 3, 11, 13}), Data({2, 3, 6, 7})},
       {{"offset", Ints{2, 3}}, {"dtype", std::string("f16")}}},
      {"CropToF32",
       "Crop",
       {Data({2, 5, 9, 9}), Data({2, 3, 4, 4})},
       {{"axis", int64_t{1}}, {"offset", Ints{1}}, {"dtype", std::string("f32")}}},
      {"Flatten", "Flatten", {Data({2, 3, 5, 7})}, {}},
      {"Reshape", "Reshape", {Data({2, 3, 5, 7})}, {{"shape", Ints{0, -1, 7}}}},
      {"ConvertF32", "Convert", {Data({2, 3, 5, 7})}, {{"dtype", std::string("f32")}}},
      {"ConvertToChannelsLast",
       "Convert",
       {Data({2, 3, 5, 7})},
       {{"layout", std::string("channels_last")}}},
      {"ConvertToRowMajorF16",
       "Convert",
       {Data({2, 3, 5, 7})},
       {{"dtype", std::string("f16")}, {"layout", std::string("row_major")}}},
      {"EltwiseSumCoeffs",
       "Eltwise",
       {Data({2, 3, 5, 7}), Data({2, 3, 5, 7})},
       {{"coeffs", std::vector<double>{0.5, -2.0}}}},
      {"EltwiseProd",
       "Eltwise",
       {Data({2, 3, 5, 7}), Data({2, 3, 5, 7}), Data({2, 3, 5, 7})},
       {{"operation", std::string("prod")}}},
      {"EltwiseMax",
       "Eltwise",
       {Data({2, 3, 5, 7}), Data({2, 3, 5, 7})},
       {{"operation", std::string("max")}}},
      {"EltwiseSumTenInputs", "Eltwise", std::vector<CaseInput>(10, Data({2, 3, 4, 5})), {}},
      // A fused ReLU: on the one pass, and on the last of the passes more than 8 inputs take.
      {"EltwiseSumRelu",
       "Eltwise",
       {Data({2, 3, 5, 7}), Data({2, 3, 5, 7})},
       {{"activation", std::string("relu")}}},
      {"EltwiseProdLeakyRelu",
       "Eltwise",
       {Data({2, 3, 5, 7}), Data({2, 3, 5, 7})},
       {{"operation", std::string("prod")},
        {"activation", std::string("relu")},
        {"negative_slope", 0.1}}},
      {"EltwiseSumTenInputsRelu",
       "Eltwise",
       std::vector<CaseInput>(10, Data({2, 3, 4, 5})),
       {{"activation", std::string("relu")}}},
      {"SoftmaxWithLoss",
       "SoftmaxWithLoss",
       {Data({6, 10}), Labels({6}, 10, 3)},
       {{"ignore_label", Ints{3}}},
       true,
       4.0},
      {"SoftmaxWithLossSpatial",
       "SoftmaxWithLoss",
       {Data({2, 5, 3, 4}), Labels({2, 1, 3, 4}, 5)},
       {{"normalization", std::string("full")}},
       true,
       4.0},
      {"AccuracyTop1", "Accuracy", {Data({20, 10}), Labels({20}, 10)}, {}},
      {"AccuracyTop3Ignore",
       "Accuracy",
       {Data({20, 10}), Labels({20}, 10, 4)},
       {{"top_k", int64_t{3}}, {"ignore_label", Ints{4}}}},
      {"EuclideanLoss", "EuclideanLoss", {Data({8, 7}), Data({8, 7})}, {}, true, 4.0},
      {"SigmoidCrossEntropy",
       "SigmoidCrossEntropyLoss",
       {Data({6, 9}), Data({6, 9}, 0, 1)},
       {},
       true,
       4.0},
      {"ContrastiveLoss",
       "ContrastiveLoss",
       {Data({8, 5}), Data({8, 5}), Labels({8}, 2)},
       {{"margin", 2.0}},
       true,
       4.0},
      {"ContrastiveLossLegacy",
       "ContrastiveLoss",
       {Data({8, 5}), Data({8, 5}), Labels({8}, 2)},
       {{"margin", 2.0}, {"legacy_version", true}},
       true,
       4.0},
  };
  return *cases;
}

TEST(CudaGraphTensorTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  int ran = 0;
  uint32_t seed = 500;
  for (const GraphKernelCase& c : Cases()) ran += testing::RunGraphKernelCase(c, seed += 11);
  std::printf("cuda_graph_tensor_test: %d cases checked\n", ran);
}

TEST(CudaGraphTensorTest, EveryOpOfTheseCasesHasACudaKernel) {
  for (const GraphKernelCase& c : Cases()) EXPECT_TRUE(testing::HasCudaKernel(c.op)) << c.op;
}

// What `kiln ops` shows: every op but Parameter and Constant (bound or uploaded by the executor)
// has a CUDA kernel, so any graph can compile for the GPU.
TEST(CudaGraphTensorTest, EveryOpButParameterAndConstantHasACudaKernel) {
  for (const OpDef* def : DefaultOpRegistry().All()) {
    if (def->name == "Parameter" || def->name == "Constant") continue;
    EXPECT_TRUE(testing::HasCudaKernel(def->name)) << def->name;
  }
}

}  // namespace
}  // namespace kiln
