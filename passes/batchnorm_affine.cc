#include "passes/batchnorm_affine.h"

#include <cmath>

#include "passes/rewrite_util.h"

namespace kiln {

namespace {
// The constant's elements as doubles when it holds exactly `count` of them.
bool ConstantValues(Value v, int64_t count, std::vector<double>* out) {
  const HostTensor* t = ConstantData(v);
  if (t == nullptr || t->type().num_elements() != count) return false;
  out->clear();
  for (float f : t->ToF32Vector()) out->push_back(f);
  return true;
}
}  // namespace

bool BatchNormAsAffine(const Graph& graph, const Node& bn, ChannelAffine* affine,
                       std::string* reason) {
  const TensorType& x = bn.input(0).type();
  if (bn.kind() != OpKind::kBatchNorm) {
    *reason = "not a BatchNorm";
    return false;
  }
  if (!bn.GetBool("use_global_stats")) {
    *reason = "BatchNorm normalizes with batch statistics (use_global_stats false)";
    return false;
  }
  if (x.rank() < 2) {
    *reason = "BatchNorm input has no channel dim";
    return false;
  }
  if (bn.GetString("mode") != "spatial" && x.rank() > 2) {
    *reason = "per-activation BatchNorm has one statistic per element, not per channel";
    return false;
  }
  const int64_t c = x.dim(1);
  std::vector<double> mean, var, factor;
  if (!ConstantValues(bn.input(1), c, &mean) || !ConstantValues(bn.input(2), c, &var) ||
      (bn.num_inputs() == 4 && !ConstantValues(bn.input(3), 1, &factor))) {
    *reason = "BatchNorm statistics are not constants";
    return false;
  }
  // Caffe's stored sums divided by their weight; a zero weight means "no statistics yet" (0).
  const double f = factor.empty() ? 1.0 : (factor[0] == 0.0 ? 0.0 : 1.0 / factor[0]);
  const double eps = bn.GetFloat("eps");
  affine->a.assign(c, 0.0);
  affine->b.assign(c, 0.0);
  for (int64_t i = 0; i < c; ++i) {
    const double inv = 1.0 / std::sqrt(var[i] * f + eps);
    affine->a[i] = inv;
    affine->b[i] = -mean[i] * f * inv;
  }
  affine->batchnorm = &bn;
  affine->scale = nullptr;
  affine->output = Value{const_cast<Node*>(&bn), 0};

  // Caffe's BatchNorm has no learned scale and shift; a Scale layer after it supplies them.
  Node* next = SoleConsumer(graph, affine->output);
  if (next == nullptr || next->kind() != OpKind::kScale || next->input(0) != affine->output)
    return true;
  std::vector<double> gamma, beta;
  const bool per_channel = next->GetInt("axis") == 1 && next->GetInt("num_axes") == 1;
  if (!per_channel || !ConstantValues(next->input(1), c, &gamma) ||
      (next->num_inputs() == 3 && !ConstantValues(next->input(2), c, &beta))) {
    return true;  // the BatchNorm alone still is an affine map
  }
  for (int64_t i = 0; i < c; ++i) {
    affine->a[i] *= gamma[i];
    affine->b[i] = affine->b[i] * gamma[i] + (beta.empty() ? 0.0 : beta[i]);
  }
  affine->scale = next;
  affine->output = next->output(0);
  return true;
}

}  // namespace kiln
