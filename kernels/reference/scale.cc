// Reference Scale and Bias.
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

}  // namespace

absl::Status RegisterReferenceScale(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(
      registry, "Scale", [](const Node& n, const DenseArgs& a) { return Affine(n, a, true); }));
  return RegisterReference(registry, "Bias",
                           [](const Node& n, const DenseArgs& a) { return Affine(n, a, false); });
}

}  // namespace kiln
