// InnerProduct: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every
// case runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> InnerProductGraphCases() {
  return {
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
}

}  // namespace testing
}  // namespace kiln
