// Dropout: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every case
// runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <cmath>
#include <cstdio>
#include <map>
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
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> DropoutGraphCases() {
  return {
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
  };
}

namespace {

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
    auto kernel = CreateKernel(**factory, *node, KernelOptions());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const bool same = node->input(0).type() == node->output_types()[0];
    EXPECT_EQ(same, v != Variant::kSubRegion) << VariantName(v);
    EXPECT_EQ((*kernel)->AliasedInput(), same ? 0 : -1) << VariantName(v);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
