// Reference backward of the layers with weights other than convolution (whose backward ops are in
// convolution.cc, through the primitive library's oracle): InnerProductBackwardData/Filter, and
// the broadcast-parameter sums BiasGradient and ScaleParamGradient. These are the oracle the CPU
// and CUDA backward kernels are tested against, and are themselves checked by finite differences
// (tests/training/gradient_check_test.cc).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/broadcast_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<BroadcastParams> ParamView(const Node& node, const TensorType& x,
                                          const TensorType& param) {
  return BroadcastParams::Create(x, param, node.GetInt("axis"), node.GetInt("num_axes"));
}

// dparam[c] = Σ_{outer, inner} dy (times x for a scale).
absl::Status SumToParam(const Node& node, const DenseArgs& a, const float* x, const float* dy,
                        const TensorType& dy_type) {
  KILN_ASSIGN_OR_RETURN(BroadcastParams b, ParamView(node, dy_type, a.out_types[0]));
  for (int64_t c = 0; c < b.channels; ++c) {
    double sum = 0.0;
    for (int64_t o = 0; o < b.outer; ++o) {
      const int64_t base = (o * b.channels + c) * b.inner;
      for (int64_t i = 0; i < b.inner; ++i) {
        sum += x != nullptr ? double{x[base + i]} * dy[base + i] : double{dy[base + i]};
      }
    }
    a.out[0][c] = static_cast<float>(sum);
  }
  return absl::OkStatus();
}

absl::Status BiasGradient(const Node& node, const DenseArgs& a) {
  return SumToParam(node, a, nullptr, a.in[0], a.in_types[0]);
}

absl::Status ScaleParamGradient(const Node& node, const DenseArgs& a) {
  return SumToParam(node, a, a.in[0], a.in[1], a.in_types[1]);
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

absl::Status RegisterReferenceConvGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "BiasGradient", BiasGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "ScaleParamGradient", ScaleParamGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "InnerProductBackwardData", IpBackwardData));
  return RegisterReference(registry, "InnerProductBackwardFilter", IpBackwardFilter);
}

}  // namespace kiln
