// The graph's CUDA kernels of the neural-network families (activations, PReLU, Dropout, Pooling,
// LRN, BatchNorm, Scale, Bias, Convolution, Deconvolution, InnerProduct) against the reference:
// f32, f16 and bf16, NCHW and NHWC, odd sizes, fresh random inputs, poisoned buffers; the
// adapter families of this file also with a strided sub-region as input 0. The GPU cases skip
// without a device. The CPU tests run everywhere (CI too): every op of the families has a CUDA
// kernel, and every variant of the table is accepted and planned by it (descriptors, workspace,
// views are all plan-time work, which needs no device).
//
// Tolerances (worst |cuda - reference| / (atol + rtol |reference|) must be <= 1): f32 1e-4 +
// 1e-4 relative; f16 4e-3 + 4e-3; bf16 3e-2 + 3e-2. Both sides read the same rounded 16-bit
// inputs and round their outputs to the same dtype, so what separates them is the kernels' f32
// arithmetic (the reference's is double) and one rounding of the output.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "tests/util/cuda_graph_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::CaseInput;
using testing::GraphKernelCase;
using Ints = std::vector<int64_t>;

CaseInput Data(std::vector<int64_t> dims, float lo = -1, float hi = 1) {
  return testing::DataInput(std::move(dims), lo, hi);
}
CaseInput Param(std::vector<int64_t> dims, float lo = -1, float hi = 1) {
  return testing::ParameterInput(std::move(dims), lo, hi);
}
AttrValue Str(const char* s) { return AttrValue(std::string(s)); }

// The ops whose adapters live in kernels/cuda/graph/{activation,pooling,normalization}_kernels.cc.
const std::set<std::string>& AdapterOps() {
  static const auto* ops = new std::set<std::string>{
      "ReLU",  "Sigmoid", "TanH", "ELU",       "ClippedReLU", "Power", "AbsVal",
      "PReLU", "Dropout", "LRN",  "BatchNorm", "Scale",       "Bias",  "Pooling"};
  return *ops;
}

const std::vector<GraphKernelCase>& Cases() {
  static const auto* cases = new std::vector<GraphKernelCase>{
      // Activations.
      {"Relu", "ReLU", {Data({2, 5, 7, 9})}, {}},
      {"LeakyRelu", "ReLU", {Data({2, 5, 7, 9})}, {{"negative_slope", 0.1}}},
      {"LeakyRelu5d", "ReLU", {Data({2, 3, 4, 5, 7})}, {{"negative_slope", -0.3}}},
      {"Sigmoid", "Sigmoid", {Data({3, 4, 5, 6}, -6, 6)}, {}},
      {"TanH", "TanH", {Data({3, 4, 5, 6}, -3, 3)}, {}},
      {"Elu", "ELU", {Data({2, 3, 5, 7}, -3, 3)}, {{"alpha", 0.7}}},
      {"ClippedRelu", "ClippedReLU", {Data({2, 3, 5, 7}, -2, 8)}, {{"ceiling", 6.0}}},
      {"AbsVal", "AbsVal", {Data({5, 33})}, {}},
      {"AbsVal4d", "AbsVal", {Data({3, 5, 7, 9})}, {}},
      {"Power",
       "Power",
       {Data({2, 3, 5, 7}, 0.1f, 2)},
       {{"power", 2.0}, {"scale", 0.5}, {"shift", 0.25}}},
      {"PowerSqrt",
       "Power",
       {Data({2, 3, 5, 7}, 0.1f, 2)},
       {{"power", 0.5}, {"scale", 2.0}, {"shift", 0.5}}},
      {"PowerLinear", "Power", {Data({3, 5, 7, 9})}, {{"scale", -1.5}, {"shift", 0.25}}},
      // An activation's backward with its dy the sum of several gradients (a gradient sum
      // folded in): ReLU reading its output, and sigmoid.
      {"ReluGradientOfTwo",
       "ActivationGradient",
       {Data({2, 5, 7, 9}), Data({2, 5, 7, 9}), Data({2, 5, 7, 9})},
       {{"activation", Str("ReLU")}, {"saved", Str("output")}}},
      {"LeakyReluGradientOfThree",
       "ActivationGradient",
       {Data({3, 4, 5, 6}), Data({3, 4, 5, 6}), Data({3, 4, 5, 6}), Data({3, 4, 5, 6})},
       {{"activation", Str("ReLU")}, {"saved", Str("output")}, {"negative_slope", 0.1}}},
      {"SigmoidGradientOfTwo",
       "ActivationGradient",
       {Data({4, 33}, 0.05f, 0.95f), Data({4, 33}), Data({4, 33})},
       {{"activation", Str("Sigmoid")}, {"saved", Str("output")}}},
      {"PRelu", "PReLU", {Data({2, 6, 5, 7}), Param({6}, 0, 0.5)}, {}},
      {"PReluShared",
       "PReLU",
       {Data({2, 6, 5, 7}), Param({1}, 0, 0.5)},
       {{"channel_shared", true}}},
      // A slope in the data's dtype: the element-wise call reads it directly.
      {"PReluSlopeInDataType", "PReLU", {Data({2, 6, 5, 7}), Data({6}, -0.5, 0.5)}, {}},
      {"PRelu2d", "PReLU", {Data({7, 13}), Param({13}, 0, 0.5)}, {}},
      {"DropoutTraining",
       "Dropout",
       {Data({4, 6, 5, 7})},
       {{"training", true}, {"ratio", 0.3}, {"seed", int64_t{9}}}},
      {"DropoutTrainingNoDrop",
       "Dropout",
       {Data({3, 5, 7, 9})},
       {{"training", true}, {"ratio", 0.0}, {"seed", int64_t{3}}}},
      {"DropoutTraining2d",
       "Dropout",
       {Data({33, 17})},
       {{"training", true}, {"ratio", 0.5}, {"seed", int64_t{123456789}}}},
      {"DropoutInference", "Dropout", {Data({4, 6, 5, 7})}, {{"training", false}}},

      // Pooling.
      {"MaxPoolCeil",
       "Pooling",
       {Data({2, 5, 13, 11})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", Str("ceil")}}},
      {"MaxPoolPaddedFloor",
       "Pooling",
       {Data({2, 5, 12, 11})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}}}},
      {"MaxPoolRect",
       "Pooling",
       {Data({2, 4, 11, 8})},
       {{"kernel", Ints{3, 2}}, {"stride", Ints{2, 1}}, {"pad", Ints{1, 0}}}},
      {"AvgPoolPadded",
       "Pooling",
       {Data({2, 5, 9, 10})},
       {{"kernel", Ints{3}},
        {"stride", Ints{2}},
        {"pad", Ints{1}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"AvgPoolExcludePad",
       "Pooling",
       {Data({2, 5, 9, 10})},
       {{"kernel", Ints{3}},
        {"stride", Ints{2}},
        {"pad", Ints{1}},
        {"mode", Str("avg_exclude_pad")},
        {"rounding", Str("ceil")}}},
      // Caffe clips the unpadded W too (9 -> 3 windows, not 4): x is read as 8 columns.
      {"MaxPoolCaffeClip",
       "Pooling",
       {Data({2, 3, 8, 9})},
       {{"kernel", Ints{3, 2}},
        {"stride", Ints{2, 3}},
        {"pad", Ints{1, 0}},
        {"rounding", Str("ceil")}}},
      {"AvgPoolCaffeClip",
       "Pooling",
       {Data({2, 3, 8, 9})},
       {{"kernel", Ints{3, 2}},
        {"stride", Ints{2, 3}},
        {"pad", Ints{1, 0}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"MaxPoolWide",
       "Pooling",
       {Data({1, 3, 17, 19})},
       {{"kernel", Ints{7}}, {"stride", Ints{3}}, {"pad", Ints{2}}, {"rounding", Str("ceil")}}},
      {"GlobalAvgPool", "Pooling", {Data({2, 7, 6, 5})}, {{"global", true}, {"mode", Str("avg")}}},
      {"GlobalMaxPool", "Pooling", {Data({2, 7, 6, 5})}, {{"global", true}}},
      {"MaxPool3d",
       "Pooling",
       {Data({2, 3, 5, 7, 6})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", Str("ceil")}}},
      {"AvgPool3dPadded",
       "Pooling",
       {Data({2, 3, 5, 7, 6})},
       {{"kernel", Ints{3, 3, 2}},
        {"stride", Ints{2}},
        {"pad", Ints{1, 1, 0}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"GlobalAvgPool3d",
       "Pooling",
       {Data({2, 3, 4, 5, 3})},
       {{"global", true}, {"mode", Str("avg_exclude_pad")}}},
      {"MaxPool1d", "Pooling", {Data({2, 5, 11})}, {{"kernel", Ints{3}}, {"stride", Ints{2}}}},
      {"AvgPool1dPadded",
       "Pooling",
       {Data({3, 4, 10})},
       {{"kernel", Ints{4}},
        {"stride", Ints{3}},
        {"pad", Ints{1}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},

      // LRN.
      {"LrnAcross", "LRN", {Data({2, 9, 5, 7})}, {{"alpha", 0.5}, {"k", 2.0}}},
      {"LrnAcrossSize3",
       "LRN",
       {Data({2, 7, 5, 7})},
       {{"local_size", int64_t{3}}, {"alpha", 2.0}, {"beta", 0.6}}},
      {"LrnAcrossSize11",
       "LRN",
       {Data({1, 13, 4, 5})},
       {{"local_size", int64_t{11}}, {"alpha", 1.0}, {"k", 1.5}}},
      {"LrnAcross5d", "LRN", {Data({2, 6, 3, 4, 5})}, {{"local_size", int64_t{3}}, {"alpha", 1.0}}},
      {"LrnAcross2d", "LRN", {Data({5, 9})}, {{"alpha", 1.0}}},
      {"LrnWithin",
       "LRN",
       {Data({2, 4, 9, 7})},
       {{"region", Str("within_channel")}, {"local_size", int64_t{3}}, {"alpha", 0.5}}},
      {"LrnWithinSize5",
       "LRN",
       {Data({2, 3, 11, 9})},
       {{"region", Str("within_channel")}, {"local_size", int64_t{5}}, {"alpha", 2.0}}},

      // BatchNorm: stored statistics (inference), with and without Caffe's scale factor, and the
      // batch's own statistics (training mode).
      {"BatchNormStored",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}, -0.5, 0.5), Param({6}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      {"BatchNormStoredNoFactor",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}, -0.5, 0.5), Param({6}, 0.5, 2)},
       {{"eps", 1e-3}}},
      // A zero scale factor means "no statistics yet": mean and variance 0.
      {"BatchNormFactorZero",
       "BatchNorm",
       {Data({2, 5, 3, 7}), Param({5}), Param({5}, 0.5, 2), Param({1}, 0, 0)},
       {{"eps", 0.5}}},
      {"BatchNormStoredPerActivation",
       "BatchNorm",
       {Data({3, 4, 5, 6}), Param({4, 5, 6}), Param({4, 5, 6}, 0.5, 2)},
       {{"mode", Str("per_activation")}}},
      // Statistics in the data's dtype are converted to packed f32 in the workspace.
      {"BatchNormStatsInDataType",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Data({6}, -0.5, 0.5), Data({6}, 0.5, 2), Data({1}, 0.5, 2)},
       {}},
      // DenseNet-121's 7x7 planes: vectors of 4 straddle two channels' planes, and a tail.
      {"BatchNormStored7x7",
       "BatchNorm",
       {Data({3, 9, 7, 7}), Param({9}, -0.5, 0.5), Param({9}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      // Channels a multiple of 4: channels-last f32 takes the float4 affine kernel.
      {"BatchNormStoredChannels8",
       "BatchNorm",
       {Data({2, 8, 5, 7}), Param({8}, -0.5, 0.5), Param({8}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      {"BatchNorm2d", "BatchNorm", {Data({9, 6}), Param({6}), Param({6}, 0.5, 2)}, {}},
      {"BatchNormBatchStats",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}), Param({6}, 0.5, 2)},
       {{"use_global_stats", false}}},
      {"BatchNormBatchStatsPerActivation",
       "BatchNorm",
       {Data({5, 4, 3, 6}), Param({4, 3, 6}), Param({4, 3, 6}, 0.5, 2)},
       {{"use_global_stats", false}, {"mode", Str("per_activation")}}},
      {"BatchNormBatchStats5d",
       "BatchNorm",
       {Data({2, 3, 4, 5, 3}), Data({3}), Data({3}, 0.5, 2)},
       {{"use_global_stats", false}}},

      // Scale and Bias.
      {"ScaleWithBias", "Scale", {Data({2, 6, 5, 7}), Param({6}), Param({6})}, {}},
      {"ScaleTwoAxes", "Scale", {Data({2, 6, 5, 7}), Param({6, 5})}, {{"num_axes", int64_t{2}}}},
      {"ScaleByData", "Scale", {Data({2, 6, 5, 7}), Data({6})}, {}},
      {"ScaleParamsInDataType", "Scale", {Data({2, 6, 5, 7}), Data({6}), Data({6})}, {}},
      {"ScaleAxis0", "Scale", {Data({2, 6, 5, 7}), Param({2})}, {{"axis", int64_t{0}}}},
      {"ScaleLastAxis",
       "Scale",
       {Data({2, 6, 5, 7}), Param({7}), Param({7})},
       {{"axis", int64_t{-1}}}},
      {"ScaleToTheEnd",
       "Scale",
       {Data({2, 6, 5, 7}), Param({6, 5, 7})},
       {{"num_axes", int64_t{-1}}}},
      {"ScaleScalar",
       "Scale",
       {Data({2, 6, 5, 7}), Param({1}), Param({1})},
       {{"num_axes", int64_t{0}}}},
      {"ScaleChannels8Relu",
       "Scale",
       {Data({2, 8, 5, 7}), Param({8}), Param({8})},
       {{"activation", std::string("relu")}}},
      {"Scale2d", "Scale", {Data({9, 13}), Param({13}), Param({13})}, {}},
      // With the ReLU the pointwise fusion folds in: per-feature and broadcast-operand paths.
      {"ScaleRelu",
       "Scale",
       {Data({2, 6, 5, 7}), Param({6}), Param({6})},
       {{"activation", std::string("relu")}}},
      {"ScaleLeakyRelu",
       "Scale",
       {Data({2, 6, 5, 7}), Param({6})},
       {{"activation", std::string("relu")}, {"negative_slope", 0.2}}},
      {"ScaleReluParamsInDataType",
       "Scale",
       {Data({2, 6, 5, 7}), Data({6}), Data({6})},
       {{"activation", std::string("relu")}}},
      {"Bias", "Bias", {Data({2, 6, 5, 7}), Param({6})}, {}},
      {"BiasTwoAxes",
       "Bias",
       {Data({2, 6, 5, 7}), Param({5, 7})},
       {{"axis", int64_t{2}}, {"num_axes", int64_t{2}}}},
      {"BiasInDataType", "Bias", {Data({2, 6, 5, 7}), Data({6})}, {}},

      // The other families of this file's scope (their adapters are tested here too).
      {"Conv",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8})},
       {{"pad", Ints{1}}}},
      // The epilogue the fusion passes give a Convolution: bias + ReLU, + residual.
      {"ConvBiasRelu",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8})},
       {{"pad", Ints{1}}, {"activation", std::string("relu")}}},
      {"ConvResidualLeakyRelu",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8}), Data({2, 8, 13, 11})},
       {{"pad", Ints{1}}, {"activation", std::string("relu")}, {"negative_slope", 0.1}}},
      {"ConvResidualNoActivation",
       "Convolution",
       {Data({2, 6, 9, 9}), Data({6, 6, 1, 1}), Data({6}), Data({2, 6, 9, 9})},
       {}},
      {"ConvStridedGrouped",
       "Convolution",
       {Data({1, 8, 15, 17}), Data({8, 2, 3, 3})},
       {{"group", int64_t{4}}, {"stride", Ints{2}}}},
      {"Deconv",
       "Deconvolution",
       {Data({2, 6, 7, 5}), Data({6, 4, 4, 4}), Data({4})},
       {{"stride", Ints{2}}, {"pad", Ints{1}}}},
      // Padding beyond the filter, as passes/shrink_deconvolution_to_crop leaves FCN-8s's
      // upscore8 (16x16 filter, stride 8, pad 31): the sub-pixel phases get negative padding.
      {"DeconvPadBeyondFilter",
       "Deconvolution",
       {Data({2, 8, 9, 7}), Data({8, 5, 16, 16})},
       {{"stride", Ints{8}}, {"pad", Ints{31, 20}}}},
      {"DeconvPadBeyondFilterSmall",
       "Deconvolution",
       {Data({2, 6, 7, 5}), Data({6, 4, 4, 4}), Data({4})},
       {{"stride", Ints{2}}, {"pad", Ints{5, 3}}}},
      {"InnerProduct", "InnerProduct", {Data({7, 3, 5, 5}), Data({11, 75}), Data({11})}, {}},
      {"InnerProductAxis2",
       "InnerProduct",
       {Data({2, 3, 4, 5}), Data({6, 20})},
       {{"axis", int64_t{2}}}},
      {"InnerProductTranspose",
       "InnerProduct",
       {Data({5, 13}), Data({13, 9})},
       {{"transpose", true}}},
  };
  return *cases;
}

// How input 0 (the data) is laid out in a variant; parameters stay f32 row-major and other data
// inputs follow the dtype (dense), as in tests/util/cuda_graph_cases.h.
enum class Variant { kNchw, kNhwc, kSubRegion };

const char* VariantName(Variant v) {
  return v == Variant::kNchw ? "nchw" : v == Variant::kNhwc ? "nhwc" : "sub-region";
}

bool IsSpatial(const CaseInput& in) { return in.dims.size() == 4 || in.dims.size() == 5; }

// A strided view of the first corner of a buffer one larger in every dim: channels-last for 4-d
// and 5-d data, row-major otherwise.
TensorType SubRegionType(DataType dtype, const std::vector<int64_t>& dims) {
  std::vector<int64_t> outer = dims;
  for (int64_t& d : outer) ++d;
  const Layout layout =
      dims.size() == 4 || dims.size() == 5 ? Layout::kChannelsLast : Layout::kRowMajor;
  const TensorType container = *TensorType::CreateWithLayout(dtype, outer, layout);
  return *TensorType::CreateStrided(dtype, dims, container.strides());
}

TensorType InputType(const CaseInput& in, int index, DataType dtype, Variant v) {
  if (in.kind != CaseInput::kData) return *TensorType::Create(DataType::kF32, in.dims);
  if (index == 0 && v == Variant::kSubRegion) return SubRegionType(dtype, in.dims);
  if (v == Variant::kNhwc && IsSpatial(in)) {
    return *TensorType::CreateWithLayout(dtype, in.dims, Layout::kChannelsLast);
  }
  return *TensorType::Create(dtype, in.dims);
}

// The variants the GPU test runs beyond the shared driver's NCHW/NHWC ones, and the CPU test
// plans: a sub-region input 0 for the adapters of this file (data of rank 2 and more).
std::vector<Variant> VariantsOf(const GraphKernelCase& c) {
  std::vector<Variant> v = {Variant::kNchw};
  bool spatial = false;
  for (const CaseInput& in : c.inputs)
    spatial = spatial || (in.kind == CaseInput::kData && IsSpatial(in));
  if (c.nhwc && spatial) v.push_back(Variant::kNhwc);
  if (AdapterOps().count(c.op) && c.inputs[0].dims.size() >= 2) v.push_back(Variant::kSubRegion);
  return v;
}

struct Tolerance {
  double atol, rtol;
};

Tolerance ToleranceFor(DataType t) {
  switch (t) {
    case DataType::kF16:
      return {4e-3, 4e-3};
    case DataType::kBF16:
      return {3e-2, 3e-2};
    default:
      return {1e-4, 1e-4};
  }
}

constexpr DataType kDtypes[] = {DataType::kF32, DataType::kF16, DataType::kBF16};

// Runs `c` with input 0 a sub-region, on CUDA and on the reference; returns 1 (one run).
int RunSubRegionCase(const GraphKernelCase& c, DataType dtype, uint32_t seed) {
  const std::string where = absl::StrCat(c.label, " ", DataTypeName(dtype), " sub-region");
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const CaseInput& in = c.inputs[i];
    inputs.push_back(
        testing::RandomTensor(InputType(in, static_cast<int>(i), dtype, Variant::kSubRegion),
                              seed + 31 * static_cast<uint32_t>(i), in.lo, in.hi));
  }
  const Tolerance tol = ToleranceFor(dtype);
  std::string kernel;
  auto ratio = testing::CompareOutputsWithReference(c.op, inputs, c.attrs, BackendChoice::kCuda,
                                                    tol.atol, tol.rtol, &kernel);
  if (!ratio.ok()) {
    ADD_FAILURE() << where << ": " << ratio.status();
    return 1;
  }
  EXPECT_EQ(kernel.rfind("cuda.", 0), 0u) << where << " ran on " << kernel;
  EXPECT_GE(*ratio, 0) << where << ": the output types differ from the reference's";
  EXPECT_LE(*ratio, 1.0) << where << ": worst error / tolerance (kernel " << kernel << ")";
  return 1;
}

TEST(CudaGraphNnTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  int ran = 0, sub_region = 0;
  uint32_t seed = 100;
  for (const GraphKernelCase& c : Cases()) {
    ran += testing::RunGraphKernelCase(c, seed += 7);
    for (Variant v : VariantsOf(c)) {
      if (v != Variant::kSubRegion) continue;
      for (DataType dtype : kDtypes) sub_region += RunSubRegionCase(c, dtype, seed += 7);
    }
  }
  std::printf("cuda_graph_nn_test: %d cases checked (%d with a sub-region input)\n",
              ran + sub_region, sub_region);
}

TEST(CudaGraphNnTest, EveryOpOfTheseFamiliesHasACudaKernel) {
  for (const std::string& op : AdapterOps()) {
    int cuda = 0;
    for (const KernelFactory* f : DefaultKernelRegistry().ForOp(op)) {
      if (f->key.backend != Backend::kCuda) continue;
      ++cuda;
      EXPECT_TRUE(absl::StartsWith(f->key.Name(), "cuda.")) << f->key.Name();
    }
    EXPECT_GE(cuda, 1) << op << " has no CUDA kernel";
  }
  for (const GraphKernelCase& c : Cases()) EXPECT_TRUE(testing::HasCudaKernel(c.op)) << c.op;
}

// A one-node graph over Parameter inputs of `types`; `node` is the op's node.
std::unique_ptr<Graph> OneNodeGraph(const GraphKernelCase& c, const std::vector<TensorType>& types,
                                    const Node** node, std::string* error) {
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < types.size(); ++i) {
    auto v = b.Input(absl::StrCat("in", i), types[i]);
    if (!v.ok()) {
      *error = std::string(v.status().message());
      return nullptr;
    }
    values.push_back(*v);
  }
  auto outs = b.Op(c.op, values, c.attrs, "op");
  if (!outs.ok()) {
    *error = std::string(outs.status().message());
    return nullptr;
  }
  *node = (*outs)[0].node;
  return b.Finish();
}

// Kernel selection and plan-time preparation need no device: every variant the GPU test runs is
// accepted by a CUDA kernel of this file's adapters and prepared (descriptors, workspace size,
// views) here, so a refusal or a plan-time error shows in CI.
TEST(CudaGraphNnTest, EveryVariantIsSelectedAndPreparedWithoutADevice) {
  int planned = 0;
  for (const GraphKernelCase& c : Cases()) {
    if (!AdapterOps().count(c.op)) continue;
    for (DataType dtype : kDtypes) {
      for (Variant v : VariantsOf(c)) {
        const std::string where =
            absl::StrCat(c.label, " ", DataTypeName(dtype), " ", VariantName(v));
        std::vector<TensorType> types;
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          types.push_back(InputType(c.inputs[i], static_cast<int>(i), dtype, v));
        }
        const Node* node = nullptr;
        std::string error;
        auto graph = OneNodeGraph(c, types, &node, &error);
        ASSERT_NE(graph, nullptr) << where << ": " << error;
        auto factory = DefaultKernelRegistry().Select(*node, Backend::kCuda);
        ASSERT_TRUE(factory.ok()) << where << ": " << factory.status();
        EXPECT_TRUE(absl::StartsWith((*factory)->key.Name(), "cuda.")) << where;
        auto kernel = (*factory)->create(*node, KernelOptions());
        ASSERT_TRUE(kernel.ok()) << where << ": " << kernel.status();
        ++planned;
      }
    }
  }
  std::printf("cuda_graph_nn_test: %d variants planned\n", planned);
}

// Inference Dropout is the identity: a view of its input (no work at all) when the output type
// is the input's, a copy when it is not (a strided input gets a dense output).
TEST(CudaGraphNnTest, InferenceDropoutIsAViewOnlyWhenTheTypesMatch) {
  const GraphKernelCase c = {"DropoutInference", "Dropout", {Data({2, 3, 4, 5})}, {}};
  for (Variant v : {Variant::kNchw, Variant::kNhwc, Variant::kSubRegion}) {
    const Node* node = nullptr;
    std::string error;
    auto graph = OneNodeGraph(c, {InputType(c.inputs[0], 0, DataType::kF16, v)}, &node, &error);
    ASSERT_NE(graph, nullptr) << error;
    auto factory = DefaultKernelRegistry().Select(*node, Backend::kCuda);
    ASSERT_TRUE(factory.ok()) << factory.status();
    auto kernel = (*factory)->create(*node, KernelOptions());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const bool same = node->input(0).type() == node->output_types()[0];
    EXPECT_EQ(same, v != Variant::kSubRegion) << VariantName(v);
    EXPECT_EQ((*kernel)->AliasedInput(), same ? 0 : -1) << VariantName(v);
  }
}

// BatchNorm over constant statistics (what compiled inference plans hold) takes its
// coefficients at plan time: the kernel says so without a device, and on the GPU it agrees with
// the reference in every dtype and layout, with Caffe's factor (also 0) and without one.
TEST(CudaGraphNnTest, BatchNormOverConstantStatisticsFixesItsCoefficientsAtPlanTime) {
  const bool gpu = ProbeCuda().usable;
  int ran = 0;
  uint32_t seed = 900;
  for (DataType dtype : kDtypes) {
    for (Variant v : {Variant::kNchw, Variant::kNhwc}) {
      for (const float factor : {-1.0f, 0.5f, 0.0f}) {  // -1: no factor input
        const std::string where =
            absl::StrCat(DataTypeName(dtype), " ", VariantName(v), " factor ", factor);
        GraphBuilder b(&DefaultOpRegistry());
        const int64_t ch = factor == 0.5f ? 8 : 9;  // 8: the channels-last float4 kernel
        const TensorType x_type = InputType(Data({3, ch, 7, 7}), 0, dtype, v);
        Value x = *b.Input("x", x_type);
        std::vector<Value> in = {
            x, *b.Constant("mean", testing::RandomTensor(testing::F32({ch}), seed++, -0.5f, 0.5f)),
            *b.Constant("var", testing::RandomTensor(testing::F32({ch}), seed++, 0.5f, 2.0f))};
        if (factor >= 0) {
          HostTensor f = testing::RandomTensor(testing::F32({1}), seed++);
          f.SetFloat(0, factor);
          in.push_back(*b.Constant("factor", f));
        }
        auto out = b.Op("BatchNorm", in, {{"eps", 1e-3}}, "bn");
        ASSERT_TRUE(out.ok()) << where << ": " << out.status();
        const Node* bn = (*out)[0].node;
        ASSERT_TRUE(b.Output("y", (*out)[0]).ok());
        auto graph = b.Finish();
        auto factory = DefaultKernelRegistry().Select(*bn, Backend::kCuda);
        ASSERT_TRUE(factory.ok()) << where << ": " << factory.status();
        auto kernel = (*factory)->create(*bn, KernelOptions());
        ASSERT_TRUE(kernel.ok()) << where << ": " << kernel.status();
        EXPECT_TRUE(absl::StrContains((*kernel)->Describe(), "coefficients fixed at plan time"))
            << where << ": " << (*kernel)->Describe();
        EXPECT_EQ((*kernel)->WorkspaceBytes(), 0u) << where;
        if (!gpu) continue;
        const std::map<std::string, HostTensor> inputs = {
            {"x", testing::RandomTensor(x_type, seed++)}};
        std::map<std::string, HostTensor> results[2];
        const BackendChoice backends[2] = {BackendChoice::kCuda, BackendChoice::kReference};
        for (int k = 0; k < 2; ++k) {
          CompileOptions options;
          options.backend = backends[k];
          auto plan = Compile(*graph, DefaultKernelRegistry(), options);
          ASSERT_TRUE(plan.ok()) << where << ": " << plan.status();
          auto ctx = ExecutionContext::Create(**plan);
          ASSERT_TRUE(ctx.ok()) << where << ": " << ctx.status();
          auto ran_outputs = (*ctx)->Run(inputs);
          ASSERT_TRUE(ran_outputs.ok()) << where << ": " << ran_outputs.status();
          results[k] = *ran_outputs;
        }
        const HostTensor& got = results[0].at("y");
        const HostTensor& want = results[1].at("y");
        ASSERT_EQ(got.type(), want.type()) << where;
        const Tolerance tol = ToleranceFor(dtype);
        for (int64_t i = 0; i < want.type().num_elements(); ++i) {
          const double w = want.GetFloat(i), g = got.GetFloat(i);
          ASSERT_LE(std::abs(g - w), tol.atol + tol.rtol * std::abs(w)) << where << " at " << i;
        }
        ++ran;
      }
    }
  }
  if (gpu) std::printf("BatchNorm over constant statistics: %d runs checked\n", ran);
}

}  // namespace
}  // namespace kiln
