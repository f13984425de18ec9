// Reference Dropout and DropoutGradient, the mask regenerated from the seed (base/dropout_mask.h)
// on both passes.
#include <algorithm>

#include "base/dropout_mask.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

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

absl::Status DropoutGradient(const Node& node, const DenseArgs& a) {
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

}  // namespace

absl::Status RegisterReferenceDropout(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Dropout", Dropout));
  return RegisterReference(registry, "DropoutGradient", DropoutGradient);
}

}  // namespace kiln
