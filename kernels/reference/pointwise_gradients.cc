// Reference backward of the element-wise ops: ActivationGradient (the formulas of
// kernels/dnn/activation_math.h, shared with the CUDA kernels), PReLUGradient, DropoutGradient
// (the forward mask regenerated from its seed), EltwiseMaxGradient and CropGradient.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dropout_mask.h"
#include "base/status_macros.h"
#include "dnn/activation_math.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<dnn::ActivationParams<double>> ParamsOf(const Node& node) {
  const std::string& act = node.GetString("activation");
  dnn::ActivationParams<double> p;
  if (act == "ReLU") {
    p.kind = dnn::kActRelu;
    p.coef = node.GetFloat("negative_slope");
  } else if (act == "ClippedReLU") {
    p.kind = dnn::kActClippedRelu;
    p.coef = node.GetFloat("ceiling");
  } else if (act == "Sigmoid") {
    p.kind = dnn::kActSigmoid;
  } else if (act == "TanH") {
    p.kind = dnn::kActTanh;
  } else if (act == "ELU") {
    p.kind = dnn::kActElu;
    p.coef = node.GetFloat("alpha");
  } else if (act == "Power") {
    p.kind = dnn::kActPower;
    p.power = node.GetFloat("power");
    p.scale = node.GetFloat("scale");
    p.shift = node.GetFloat("shift");
  } else if (act == "AbsVal") {
    p.kind = dnn::kActAbs;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown activation '", act, "'"));
  }
  return p;
}

// The saved tensor stands for x and/or y: the formulas that read one only (ops/gradients/
// pointwise_gradients.cc picks which is saved) get the same value for both. Several dy inputs
// are summed and rounded to f32 first, as the separate Eltwise sum they replace would.
absl::Status Activation(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(dnn::ActivationParams<double> p, ParamsOf(node));
  const int64_t n = a.in_types[0].num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const double s = a.in[0][i];
    double sum = 0;
    for (size_t j = 1; j < a.in.size(); ++j) sum += a.in[j][i];
    const double dy = static_cast<float>(sum);
    a.out[0][i] = static_cast<float>(dnn::ActivationGradient(p, s, dy, s));
  }
  return absl::OkStatus();
}

absl::Status PRelu(const Node& node, const DenseArgs& a) {
  const TensorType& x = a.in_types[0];
  const bool shared = node.GetBool("channel_shared");
  const int64_t n = x.dim(0), c = x.dim(1), inner = ProductOfDims(x.dims(), 2, x.rank());
  std::vector<double> dslope(shared ? 1 : c, 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const double slope = a.in[1][shared ? 0 : ch];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * c + ch) * inner + i;
        const double xv = a.in[0][at], dy = a.in[2][at];
        a.out[0][at] = static_cast<float>(xv > 0 ? dy : slope * dy);
        if (xv <= 0) dslope[shared ? 0 : ch] += dy * xv;
      }
    }
  }
  for (size_t i = 0; i < dslope.size(); ++i) a.out[1][i] = static_cast<float>(dslope[i]);
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
