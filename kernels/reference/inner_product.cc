// Reference InnerProduct: y[m][n] = sum_k x[m][k] * W[n][k] (+ b[n]), double accumulation.
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status InnerProduct(const Node& node, const DenseArgs& a) {
  const TensorType& x = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  const bool transpose = node.GetBool("transpose");
  const int64_t m = ProductOfDims(x.dims(), 0, axis), k = ProductOfDims(x.dims(), axis, x.rank());
  const int64_t n = transpose ? a.in_types[1].dim(1) : a.in_types[1].dim(0);
  const float* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bias[j] : 0.0;
      for (int64_t q = 0; q < k; ++q) {
        const float w = transpose ? a.in[1][q * n + j] : a.in[1][j * k + q];
        acc += static_cast<double>(a.in[0][i * k + q]) * w;
      }
      a.out[0][i * n + j] = static_cast<float>(acc);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceInnerProduct(KernelRegistry& registry) {
  return RegisterReference(registry, "InnerProduct", InnerProduct);
}

}  // namespace kiln
