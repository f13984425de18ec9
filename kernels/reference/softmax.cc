// Reference Softmax / log-softmax over one axis, max-subtracted, double sums.
#include <algorithm>
#include <cmath>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status Softmax(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), t.rank(), "axis"));
  const bool log = node.GetBool("log");
  const int64_t outer = ProductOfDims(t.dims(), 0, axis), c = t.dim(axis),
                inner = ProductOfDims(t.dims(), axis + 1, t.rank());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float* x = a.in[0] + o * c * inner + i;
      float* y = a.out[0] + o * c * inner + i;
      float max = x[0];
      for (int64_t j = 1; j < c; ++j) max = std::max(max, x[j * inner]);
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(double{x[j * inner]} - max);
      for (int64_t j = 0; j < c; ++j) {
        const double shifted = double{x[j * inner]} - max;
        y[j * inner] = static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceSoftmax(KernelRegistry& registry) {
  return RegisterReference(registry, "Softmax", Softmax);
}

}  // namespace kiln
