// The graph's CUDA kernels of the data-movement, Eltwise, Softmax and loss families against the
// reference, on the families' case tables (tests/ops/<family>/<family>_cuda_graph_test.cc,
// linked in): f32, f16 and bf16, NCHW and NHWC, fresh random inputs, poisoned buffers. The GPU
// cases skip without a device; the registry test runs everywhere.
#include <cstdio>

#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/device.h"
#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {
namespace {

// Every family's cases, in the order their seeds follow.
const std::vector<GraphKernelCase>& Cases() {
  static const auto* cases = new std::vector<GraphKernelCase>(Concatenated({
      SoftmaxGraphCases(),
      TensorGraphCases(),
      EltwiseGraphCases(),
      LossGraphCases(),
  }));
  return *cases;
}

TEST(CudaGraphTensorTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  int ran = 0;
  uint32_t seed = 500;
  for (const GraphKernelCase& c : Cases()) ran += RunGraphKernelCase(c, seed += 11);
  std::printf("cuda_graph_tensor_test: %d cases checked\n", ran);
}

TEST(CudaGraphTensorTest, EveryOpOfTheseCasesHasACudaKernel) {
  for (const GraphKernelCase& c : Cases()) EXPECT_TRUE(HasCudaKernel(c.op)) << c.op;
}

// What `kiln ops` shows: every op but Parameter and Constant (bound or uploaded by the executor)
// has a CUDA kernel, so any graph can compile for the GPU.
TEST(CudaGraphTensorTest, EveryOpButParameterAndConstantHasACudaKernel) {
  for (const OpDef* def : DefaultOpRegistry().All()) {
    if (def->name == "Parameter" || def->name == "Constant") continue;
    EXPECT_TRUE(HasCudaKernel(def->name)) << def->name;
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
