// Reference backward of the losses, each scaled by its loss_weight attribute (the constant
// gradient the objective gives the loss, Caffe's top diff) and divided by the forward pass's
// normalizer (loss.cc).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// Caffe's normalizers; never below 1.
double Normalizer(const std::string& mode, int64_t full, int64_t valid, int64_t batch) {
  const double n = mode == "full"         ? static_cast<double>(full)
                   : mode == "valid"      ? static_cast<double>(valid)
                   : mode == "batch_size" ? static_cast<double>(batch)
                                          : 1.0;
  return std::max(1.0, n);
}

absl::Status SoftmaxWithLoss(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), t.rank(), "axis"));
  const int64_t outer = ProductOfDims(t.dims(), 0, axis), classes = t.dim(axis);
  const int64_t inner = ProductOfDims(t.dims(), axis + 1, t.rank());
  const auto& ignore = node.GetInts("ignore_label");
  int64_t valid = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = static_cast<int64_t>(a.in[1][o * inner + i]);
      const float* x = a.in[0] + o * classes * inner + i;
      float* dx = a.out[0] + o * classes * inner + i;
      if (!ignore.empty() && label == ignore[0]) {
        for (int64_t c = 0; c < classes; ++c) dx[c * inner] = 0.0f;
        continue;
      }
      if (label < 0 || label >= classes) {
        return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': label ", label,
                                                       " is outside [0, ", classes, ")"));
      }
      ++valid;
      float max = x[0];
      for (int64_t c = 1; c < classes; ++c) max = std::max(max, x[c * inner]);
      double sum = 0.0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(double{x[c * inner]} - max);
      for (int64_t c = 0; c < classes; ++c) {
        const double p = std::exp(double{x[c * inner]} - max) / sum;
        dx[c * inner] = static_cast<float>(p - (c == label ? 1.0 : 0.0));
      }
    }
  }
  const double scale = node.GetFloat("loss_weight") /
                       Normalizer(node.GetString("normalization"), outer * inner, valid, outer);
  for (int64_t i = 0; i < t.num_elements(); ++i) a.out[0][i] *= static_cast<float>(scale);
  return absl::OkStatus();
}

absl::Status EuclideanLoss(const Node& node, const DenseArgs& a) {
  const double scale = node.GetFloat("loss_weight") / static_cast<double>(a.in_types[0].dim(0));
  for (int64_t i = 0; i < a.in_types[0].num_elements(); ++i) {
    a.out[0][i] = static_cast<float>(scale * (double{a.in[0][i]} - a.in[1][i]));
  }
  return absl::OkStatus();
}

absl::Status SigmoidCrossEntropyLoss(const Node& node, const DenseArgs& a) {
  const auto& ignore = node.GetInts("ignore_label");
  const int64_t n = a.in_types[0].num_elements();
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double t = a.in[1][i];
    if (!ignore.empty() && t == static_cast<double>(ignore[0])) {
      a.out[0][i] = 0.0f;
      continue;
    }
    ++valid;
    a.out[0][i] = static_cast<float>(1.0 / (1.0 + std::exp(-double{a.in[0][i]})) - t);
  }
  const double scale = node.GetFloat("loss_weight") /
                       Normalizer(node.GetString("normalization"), n, valid, a.in_types[0].dim(0));
  for (int64_t i = 0; i < n; ++i) a.out[0][i] *= static_cast<float>(scale);
  return absl::OkStatus();
}

// Similar pairs: w (a - b) / N. Dissimilar pairs inside the margin: -w (m - d) / (d + 1e-4)
// (a - b) / N, or -w (a - b) / N in the legacy form (m - d²). db = -da.
absl::Status ContrastiveLoss(const Node& node, const DenseArgs& a) {
  const int64_t rows = a.in_types[0].dim(0);
  const int64_t width = a.in_types[0].num_elements() / rows;
  const double margin = node.GetFloat("margin");
  const bool legacy = node.GetBool("legacy_version");
  const double w = node.GetFloat("loss_weight") / static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double d2 = 0.0;
    for (int64_t j = 0; j < width; ++j) {
      const double d = double{a.in[0][r * width + j]} - a.in[1][r * width + j];
      d2 += d * d;
    }
    double factor = 0.0;
    if (a.in[2][r] != 0.0f) {
      factor = w;
    } else if (legacy) {
      factor = margin - d2 > 0 ? -w : 0.0;
    } else {
      const double d = std::sqrt(d2);
      factor = margin - d > 0 ? -w * (margin - d) / (d + 1e-4) : 0.0;
    }
    for (int64_t j = 0; j < width; ++j) {
      const double g = factor * (double{a.in[0][r * width + j]} - a.in[1][r * width + j]);
      a.out[0][r * width + j] = static_cast<float>(g);
      a.out[1][r * width + j] = static_cast<float>(-g);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceLossGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "SoftmaxWithLossGradient", SoftmaxWithLoss));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "EuclideanLossGradient", EuclideanLoss));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "SigmoidCrossEntropyLossGradient", SigmoidCrossEntropyLoss));
  return RegisterReference(registry, "ContrastiveLossGradient", ContrastiveLoss);
}

}  // namespace kiln
