// Reference Eltwise: sum with coefficients, product, max; then the fused ReLU if any. And
// EltwiseMaxGradient.
#include <algorithm>

#include "base/status_macros.h"
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

absl::Status EltwiseMaxGradient(const Node& node, const DenseArgs& a) {
  const int inputs = static_cast<int>(a.in.size()) - 1;
  const int which = static_cast<int>(node.GetInt("which"));
  const int64_t n = a.in_types[0].num_elements();
  for (int64_t i = 0; i < n; ++i) {
    int winner = 0;  // The first input holding the maximum, as the forward pass decides.
    for (int k = 1; k < inputs; ++k) {
      if (a.in[k][i] > a.in[winner][i]) winner = k;
    }
    a.out[0][i] = winner == which ? a.in[inputs][i] : 0.0f;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceEltwise(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Eltwise", Eltwise));
  return RegisterReference(registry, "EltwiseMaxGradient", EltwiseMaxGradient);
}

}  // namespace kiln
