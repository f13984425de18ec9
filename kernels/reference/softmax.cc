// Reference Softmax / log-softmax over one axis (max-subtracted, double sums) and its gradient.
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

// SoftmaxGradient(y, dy) -> dx.
// softmax: dx = y (dy - Σ dy y); log-softmax: dx = dy - exp(y) Σ dy, along the axis.
absl::Status SoftmaxGradient(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), t.rank(), "axis"));
  const bool log = node.GetBool("log");
  const int64_t outer = ProductOfDims(t.dims(), 0, axis), classes = t.dim(axis);
  const int64_t inner = ProductOfDims(t.dims(), axis + 1, t.rank());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * classes * inner + i;
      double dot = 0.0;
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t at = base + c * inner;
        dot += log ? double{a.in[1][at]} : double{a.in[1][at]} * a.in[0][at];
      }
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t at = base + c * inner;
        const double y = a.in[0][at], dy = a.in[1][at];
        a.out[0][at] = static_cast<float>(log ? dy - std::exp(y) * dot : y * (dy - dot));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceSoftmax(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Softmax", Softmax));
  return RegisterReference(registry, "SoftmaxGradient", SoftmaxGradient);
}

}  // namespace kiln
