// Reference Scale and Bias, and the broadcast-parameter sums of their backward, BiasGradient and
// ScaleParamGradient (checked by finite differences, tests/training/gradient_check_test.cc).
#include <algorithm>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/broadcast_params.h"

namespace kiln {

namespace {

// y = x * scale (+ bias) when has_scale, else y = x + bias, with params broadcast per channel.
absl::Status Affine(const Node& node, const DenseArgs& a, bool has_scale) {
  KILN_ASSIGN_OR_RETURN(BroadcastParams b,
                        BroadcastParams::Create(a.in_types[0], a.in_types[1], node.GetInt("axis"),
                                                node.GetInt("num_axes")));
  const float* scale = has_scale ? a.in[1] : nullptr;
  const float* bias = has_scale ? (a.in.size() > 2 ? a.in[2] : nullptr) : a.in[1];
  // The fused activation (passes/fuse_pointwise), Scale only.
  const bool relu = has_scale && node.GetString("activation") == "relu";
  const float slope = has_scale ? static_cast<float>(node.GetFloat("negative_slope")) : 0.0f;
  for (int64_t o = 0; o < b.outer; ++o) {
    for (int64_t c = 0; c < b.channels; ++c) {
      for (int64_t i = 0; i < b.inner; ++i) {
        const int64_t at = (o * b.channels + c) * b.inner + i;
        float v = a.in[0][at];
        if (scale) v *= scale[c];
        if (bias) v += bias[c];
        if (relu) v = std::max(v, 0.0f) + slope * std::min(v, 0.0f);
        a.out[0][at] = v;
      }
    }
  }
  return absl::OkStatus();
}

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

}  // namespace

absl::Status RegisterReferenceScale(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(
      registry, "Scale", [](const Node& n, const DenseArgs& a) { return Affine(n, a, true); }));
  KILN_RETURN_IF_ERROR(RegisterReference(
      registry, "Bias", [](const Node& n, const DenseArgs& a) { return Affine(n, a, false); }));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "BiasGradient", BiasGradient));
  return RegisterReference(registry, "ScaleParamGradient", ScaleParamGradient);
}

}  // namespace kiln
