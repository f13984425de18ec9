// Reference Eltwise: sum with coefficients, product, max; then the fused ReLU if any.
#include <algorithm>

#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Eltwise(const Node& node, const DenseArgs& a) {
  const std::string& op = node.GetString("operation");
  const auto& coeffs = node.GetFloats("coeffs");
  const bool relu = node.GetString("activation") == "relu";
  const float slope = static_cast<float>(node.GetFloat("negative_slope"));
  const int64_t n = a.in_types[0].num_elements();
  for (int64_t i = 0; i < n; ++i) {
    double acc = op == "sum" ? 0.0 : a.in[0][i];
    for (size_t j = 0; j < a.in.size(); ++j) {
      const double v = a.in[j][i];
      if (op == "sum") {
        acc += (coeffs.empty() ? 1.0 : coeffs[j]) * v;
      } else if (j > 0) {
        acc = op == "prod" ? acc * v : std::max(acc, v);
      }
    }
    // A fused ReLU acts on the rounded result, as the separate ReLU would.
    const float y = static_cast<float>(acc);
    a.out[0][i] = relu ? std::max(y, 0.0f) + slope * std::min(y, 0.0f) : y;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceEltwise(KernelRegistry& registry) {
  return RegisterReference(registry, "Eltwise", Eltwise);
}

}  // namespace kiln
