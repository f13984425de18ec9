// Reference backward of the element-wise ops: ActivationGradient and PReLUGradient through the
// primitive library's oracle (see dnn_oracle.h), DropoutGradient (the forward mask regenerated
// from its seed), EltwiseMaxGradient and CropGradient.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dropout_mask.h"
#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/activation.h"
#include "kernels/dnn_plans/tensor.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// The saved tensor stands for x and/or y: the formulas that read one only (ops/gradients/
// pointwise_gradients.cc picks which is saved) get the same value for both. Several dy inputs
// are summed and rounded to f32 first, as the separate Eltwise sum they replace would.
absl::Status Activation(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn::ActivationDescriptor act, dnn_plans::ActivationOf(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor sd, dnn_plans::DescriptorOf(a.in_types[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, dnn_plans::DescriptorOf(a.out_types[0]));
  DoubleOperands d(a);
  std::vector<double> dy(d.in(1), d.in(1) + a.in_types[1].num_elements());
  if (a.in.size() > 2) {
    for (size_t j = 2; j < a.in.size(); ++j) {
      KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, dnn_plans::DescriptorOf(a.in_types[j]));
      KILN_RETURN_IF_ERROR(dnn::reference::AddTensor(1.0, dyd, d.in(j), 1.0, dxd, dy.data()));
    }
    for (double& v : dy) v = static_cast<float>(v);
  }
  KILN_RETURN_IF_ERROR(dnn::reference::ActivationBackward(act, 1.0, sd, d.in(0), dxd, dy.data(), sd,
                                                          d.in(0), 0.0, dxd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// PReLUGradient(x, slope, dy) -> (dx, dslope).
absl::Status PRelu(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PReluPlan p, dnn_plans::PlanPRelu(node, TypesOf(a)));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, dnn_plans::DescriptorOf(a.in_types[2]));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::PReluBackward(p.xd, d.in(0), dyd, d.in(2), p.slope, d.in(1),
                                                     1.0, 0.0, p.yd, d.out(0), 1.0, 0.0, d.out(1)));
  d.Store(a);
  return absl::OkStatus();
}

absl::Status Dropout(const Node& node, const DenseArgs& a) {
  const float ratio = static_cast<float>(node.GetFloat("ratio"));
  uint64_t seed = static_cast<uint64_t>(node.GetInt("seed"));
  if (a.in.size() > 1) seed += static_cast<uint64_t>(a.in[1][0]);
  const float scale = 1.0f / (1.0f - ratio);
  const int64_t n = a.in_types[0].num_elements();
  for (int64_t i = 0; i < n; ++i) {
    a.out[0][i] = DropoutKeep(seed, static_cast<uint64_t>(i), ratio) ? a.in[0][i] * scale : 0.0f;
  }
  return absl::OkStatus();
}

absl::Status EltwiseMax(const Node& node, const DenseArgs& a) {
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

absl::Status Crop(const Node& node, const DenseArgs& a) {
  const TensorType& dy = a.in_types[0];
  const TensorType& dx = a.out_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), dx.rank(), "axis"));
  const auto& offsets = node.GetInts("offset");
  std::vector<int64_t> offset(dx.rank(), 0);
  for (int d = axis; d < dx.rank(); ++d) {
    offset[d] = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
    if (offset[d] + dy.dim(d) > dx.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': offset ", offset[d],
                                                     " on axis ", d, " runs past the input"));
    }
  }
  std::fill(a.out[0], a.out[0] + dx.num_elements(), 0.0f);
  std::vector<int64_t> index(dy.rank(), 0);
  for (int64_t i = 0; i < dy.num_elements(); ++i) {
    int64_t rest = i, dst = 0;
    for (int d = dy.rank() - 1; d >= 0; --d) {
      index[d] = rest % dy.dim(d);
      rest /= dy.dim(d);
    }
    for (int d = 0; d < dx.rank(); ++d) dst = dst * dx.dim(d) + index[d] + offset[d];
    a.out[0][dst] = a.in[0][i];
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferencePointwiseGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "ActivationGradient", Activation));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PReLUGradient", PRelu));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "DropoutGradient", Dropout));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "EltwiseMaxGradient", EltwiseMax));
  return RegisterReference(registry, "CropGradient", Crop, "copy");
}

}  // namespace kiln
