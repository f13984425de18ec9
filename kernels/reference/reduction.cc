// Reference Reduction and ReductionGradient (ops/reduction_ops.cc), double accumulation.
#include <cmath>
#include <string>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

struct ReductionShape {
  int64_t outer, inner;
  std::string op;
  double coeff;
};

absl::StatusOr<ReductionShape> ShapeOf(const Node& node, const std::vector<int64_t>& x) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.size(), "axis"));
  return ReductionShape{ProductOfDims(x, 0, axis), ProductOfDims(x, axis, x.size()),
                        node.GetString("operation"), node.GetFloat("coeff")};
}

absl::Status Reduction(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(ReductionShape s, ShapeOf(node, a.in_types[0].dims()));
  for (int64_t o = 0; o < s.outer; ++o) {
    double sum = 0;
    for (int64_t i = 0; i < s.inner; ++i) {
      const double v = a.in[0][o * s.inner + i];
      sum += s.op == "asum" ? std::fabs(v) : s.op == "sumsq" ? v * v : v;
    }
    if (s.op == "mean") sum /= static_cast<double>(s.inner);
    a.out[0][o] = static_cast<float>(s.coeff * sum);
  }
  return absl::OkStatus();
}

absl::Status ReductionGradient(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(ReductionShape s, ShapeOf(node, a.in_types[0].dims()));
  for (int64_t o = 0; o < s.outer; ++o) {
    const double dy = s.coeff * a.in[1][o];
    for (int64_t i = 0; i < s.inner; ++i) {
      const double v = a.in[0][o * s.inner + i];
      double d = dy;
      if (s.op == "asum") d = v > 0 ? dy : v < 0 ? -dy : 0.0;
      if (s.op == "sumsq") d = 2 * v * dy;
      if (s.op == "mean") d = dy / static_cast<double>(s.inner);
      a.out[0][o * s.inner + i] = static_cast<float>(d);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceReduction(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Reduction", Reduction));
  return RegisterReference(registry, "ReductionGradient", ReductionGradient);
}

}  // namespace kiln
