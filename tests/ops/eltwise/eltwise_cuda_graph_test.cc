// Scale, Bias and Eltwise: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h): every case runs on CUDA against the reference backend in f32,
// f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> ScaleBiasGraphCases() {
  return {
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
  };
}

// Part of //tests/kernels:cuda_graph_tensor_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> EltwiseGraphCases() {
  return {
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
  };
}

}  // namespace testing
}  // namespace kiln
