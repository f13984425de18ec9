// Reference element-wise activations and Dropout.
#include <algorithm>
#include <cmath>

#include "base/dropout_mask.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// Registers an op whose output element i depends only on input element i.
template <typename MakeFn>
absl::Status RegisterPointwise(KernelRegistry& registry, const std::string& op, MakeFn make) {
  return RegisterReference(registry, op, [make](const Node& node, const DenseArgs& a) {
    auto f = make(node);
    const int64_t n = a.in_types[0].num_elements();
    for (int64_t i = 0; i < n; ++i) a.out[0][i] = f(a.in[0][i], i);
    return absl::OkStatus();
  });
}

absl::Status PRelu(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const bool shared = node.GetBool("channel_shared");
  const int64_t c = t.dim(1), inner = ProductOfDims(t.dims(), 2, t.rank());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float slope = a.in[1][shared ? 0 : (i / inner) % c];
    const float x = a.in[0][i];
    a.out[0][i] = x > 0 ? x : slope * x;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceActivation(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "ReLU", [](const Node& n) {
    const float slope = static_cast<float>(n.GetFloat("negative_slope"));
    return [slope](float x, int64_t) { return std::max(x, 0.0f) + slope * std::min(x, 0.0f); };
  }));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PReLU", PRelu));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "Sigmoid", [](const Node&) {
    return [](float x, int64_t) { return static_cast<float>(1.0 / (1.0 + std::exp(-double{x}))); };
  }));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "TanH", [](const Node&) {
    return [](float x, int64_t) { return static_cast<float>(std::tanh(double{x})); };
  }));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "ELU", [](const Node& n) {
    const double alpha = n.GetFloat("alpha");
    return [alpha](float x, int64_t) {
      return x > 0 ? x : static_cast<float>(alpha * std::expm1(double{x}));
    };
  }));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "ClippedReLU", [](const Node& n) {
    const float ceiling = static_cast<float>(n.GetFloat("ceiling"));
    return [ceiling](float x, int64_t) { return std::min(std::max(x, 0.0f), ceiling); };
  }));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "Power", [](const Node& n) {
    const double power = n.GetFloat("power"), scale = n.GetFloat("scale"),
                 shift = n.GetFloat("shift");
    return [=](float x, int64_t) {
      return static_cast<float>(std::pow(shift + scale * double{x}, power));
    };
  }));
  KILN_RETURN_IF_ERROR(RegisterPointwise(registry, "AbsVal", [](const Node&) {
    return [](float x, int64_t) { return std::fabs(x); };
  }));
  return RegisterReference(registry, "Dropout", [](const Node& n, const DenseArgs& a) {
    const int64_t count = a.in_types[0].num_elements();
    if (!n.GetBool("training")) {
      std::copy(a.in[0], a.in[0] + count, a.out[0]);
      return absl::OkStatus();
    }
    const float ratio = static_cast<float>(n.GetFloat("ratio"));
    uint64_t seed = static_cast<uint64_t>(n.GetInt("seed"));
    if (a.in.size() > 1) seed += static_cast<uint64_t>(a.in[1][0]);  // the per-run offset
    const float scale = 1.0f / (1.0f - ratio);
    for (int64_t i = 0; i < count; ++i) {
      a.out[0][i] = DropoutKeep(seed, static_cast<uint64_t>(i), ratio) ? a.in[0][i] * scale : 0.0f;
    }
    return absl::OkStatus();
  });
}

}  // namespace kiln
