// Reference InnerProduct: y[m][n] = sum_k x[m][k] * W[n][k] (+ b[n]), double accumulation; and its
// backward ops InnerProductBackwardData and InnerProductBackwardFilter, the oracle the CPU and
// CUDA backward kernels are tested against, themselves checked by finite differences
// (tests/training/gradient_check_test.cc).
#include <vector>

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

// x viewed as [M, K] (flattened from axis), weight [N, K] ([K, N] transposed), dy [M, N].
struct IpDims {
  int64_t m, k, n;
  bool transpose;
};

absl::StatusOr<IpDims> IpOf(const Node& node, const std::vector<int64_t>& x, int64_t n) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.size(), "axis"));
  return IpDims{ProductOfDims(x, 0, axis), ProductOfDims(x, axis, x.size()), n,
                node.GetBool("transpose")};
}

inline int64_t WeightAt(const IpDims& d, int64_t n, int64_t k) {
  return d.transpose ? k * d.n + n : n * d.k + k;
}

absl::Status IpBackwardData(const Node& node, const DenseArgs& a) {
  const TensorType& dy_t = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(IpDims d, IpOf(node, a.out_types[0].dims(), dy_t.dim(dy_t.rank() - 1)));
  for (int64_t m = 0; m < d.m; ++m) {
    for (int64_t k = 0; k < d.k; ++k) {
      double sum = 0.0;
      for (int64_t n = 0; n < d.n; ++n)
        sum += double{a.in[0][m * d.n + n]} * a.in[1][WeightAt(d, n, k)];
      a.out[0][m * d.k + k] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

absl::Status IpBackwardFilter(const Node& node, const DenseArgs& a) {
  const TensorType& dy_t = a.in_types[1];
  KILN_ASSIGN_OR_RETURN(IpDims d, IpOf(node, a.in_types[0].dims(), dy_t.dim(dy_t.rank() - 1)));
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t k = 0; k < d.k; ++k) {
      double sum = 0.0;
      for (int64_t m = 0; m < d.m; ++m) sum += double{a.in[1][m * d.n + n]} * a.in[0][m * d.k + k];
      a.out[0][WeightAt(d, n, k)] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceInnerProduct(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "InnerProduct", InnerProduct));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "InnerProductBackwardData", IpBackwardData));
  return RegisterReference(registry, "InnerProductBackwardFilter", IpBackwardFilter);
}

}  // namespace kiln
