// Reference ChannelShuffle (ops/channel_shuffle_ops.cc): y[n, j g + i, s] = x[n, i (C / g) + j, s]
// over the row-major [N, C, S] view (S: the dims after C).
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status ChannelShuffle(const Node& node, const DenseArgs& a) {
  const std::vector<int64_t>& dims = a.in_types[0].dims();
  const int64_t N = dims[0], C = dims[1], S = ProductOfDims(dims, 2, dims.size());
  const int64_t g = node.GetInt("group"), per = C / g;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = 0; i < g; ++i) {
      for (int64_t j = 0; j < per; ++j) {
        const float* from = a.in[0] + (n * C + i * per + j) * S;
        float* to = a.out[0] + (n * C + j * g + i) * S;
        for (int64_t s = 0; s < S; ++s) to[s] = from[s];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceChannelShuffle(KernelRegistry& registry) {
  return RegisterReference(registry, "ChannelShuffle", ChannelShuffle);
}

}  // namespace kiln
