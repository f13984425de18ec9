// Softmax: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every case
// runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_tensor_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> SoftmaxGraphCases() {
  return {
      {"Softmax", "Softmax", {Data({3, 17, 5})}, {}},
      {"SoftmaxChannels4d", "Softmax", {Data({2, 7, 3, 5})}, {}},
      {"LogSoftmaxLastAxis", "Softmax", {Data({4, 33})}, {{"log", true}, {"axis", int64_t{-1}}}},
  };
}

}  // namespace testing
}  // namespace kiln
