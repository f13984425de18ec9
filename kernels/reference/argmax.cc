// Reference ArgMax (ops/argmax_ops.cc): each row's entries sorted by the op's order (value
// descending, NaN first, ties to the higher index, i.e. Caffe's std::greater on (value, index)
// pairs) with std::partial_sort, the first top_k written where ops/argmax_params.h says.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/argmax_params.h"

namespace kiln {

namespace {

// True when (va, ia) ranks before (vb, ib).
bool RanksBefore(float va, int64_t ia, float vb, int64_t ib) {
  const bool a_nan = std::isnan(va), b_nan = std::isnan(vb);
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && va != vb) return va > vb;
  return ia > ib;
}

absl::Status ArgMax(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(ArgMaxGeometry g,
                        ArgMaxGeometryOf(a.in_types[0].dims(), node.GetInt("top_k"),
                                         node.GetInts("axis"), node.GetBool("out_max_val")));
  const float* x = a.in[0];
  float* y = a.out[0];
  std::vector<int64_t> order(g.dim);
  for (int64_t o = 0; o < g.outer; ++o) {
    for (int64_t i = 0; i < g.inner; ++i) {
      const float* row = x + o * g.dim * g.inner + i;  // element j at row[j * inner]
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + g.top_k, order.end(),
                        [&](int64_t p, int64_t q) {
                          return RanksBefore(row[p * g.inner], p, row[q * g.inner], q);
                        });
      for (int64_t k = 0; k < g.top_k; ++k) {
        const int64_t j = order[k];
        const float value = row[j * g.inner];
        if (g.has_axis) {
          y[ArgMaxOutputOffset(g, o, i, k, false)] = g.out_max_val ? value : static_cast<float>(j);
        } else {
          y[ArgMaxOutputOffset(g, o, i, k, false)] = static_cast<float>(j);
          if (g.out_max_val) y[ArgMaxOutputOffset(g, o, i, k, true)] = value;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceArgMax(KernelRegistry& registry) {
  return RegisterReference(registry, "ArgMax", ArgMax);
}

}  // namespace kiln
