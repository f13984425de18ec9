// Reference element-wise activations and PReLU through the primitive library's oracle (see
// dnn_oracle.h), and Dropout.
#include "kernels/dnn_plans/activation.h"

#include <algorithm>

#include "base/dropout_mask.h"
#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Activation(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::ActivationPlan p, dnn_plans::PlanActivation(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::ActivationForward(p.act, 1.0, p.xd, d.in(0), 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

absl::Status PRelu(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PReluPlan p, dnn_plans::PlanPRelu(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::PReluForward(p.xd, d.in(0), p.slope, d.in(1), 1.0, 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// Dropout stays a formula of its own: the graph op takes a per-run seed offset as an input,
// which the oracle's descriptor has no place for, and it scales in f32 as the CUDA kernel does.
absl::Status Dropout(const Node& n, const DenseArgs& a) {
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
}

}  // namespace

absl::Status RegisterReferenceActivation(KernelRegistry& registry) {
  for (const char* op : {"ReLU", "Sigmoid", "TanH", "ELU", "ClippedReLU", "Power", "AbsVal"}) {
    KILN_RETURN_IF_ERROR(RegisterReference(registry, op, Activation));
  }
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PReLU", PRelu));
  return RegisterReference(registry, "Dropout", Dropout);
}

}  // namespace kiln
