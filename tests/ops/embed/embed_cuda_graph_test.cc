// Embed and EmbedGradient: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h), on CUDA against the reference backend in f32, f16 and bf16 (the
// indices stay f32 labels).
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test, after the recurrent cases.
std::vector<GraphKernelCase> EmbedGraphCases() {
  GraphKernelCase lookup{"Embed", "Embed", {Labels({5, 7}, 11), Data({11, 9}), Data({9})}, {}};
  lookup.nhwc = false;
  // 3000 indices over a 40-row table: two shared-memory chunks in the backward's scan.
  GraphKernelCase grad{"EmbedGradient",
                       "EmbedGradient",
                       {Labels({3000}, 40), Data({3000, 6})},
                       {{"weight_dims", std::vector<int64_t>{40, 6}}}};
  grad.nhwc = false;
  grad.tolerance_scale = 4;  // each row sums ~75 dy rows
  return {lookup, grad};
}

}  // namespace testing
}  // namespace kiln
