// Reference SoftmaxWithLoss, Accuracy, EuclideanLoss, SigmoidCrossEntropyLoss and ContrastiveLoss
// (Caffe semantics), and the losses' backward, each scaled by its loss_weight attribute (the
// constant gradient the objective gives the loss, Caffe's top diff) and divided by the forward
// pass's normalizer.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

struct LabelView {
  int64_t outer, classes, inner;
  bool has_ignore;
  int64_t ignore;
};

absl::StatusOr<LabelView> Labels(const Node& node, const TensorType& scores) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), scores.rank(), "axis"));
  const auto& ignore = node.GetInts("ignore_label");
  return LabelView{ProductOfDims(scores.dims(), 0, axis), scores.dim(axis),
                   ProductOfDims(scores.dims(), axis + 1, scores.rank()), !ignore.empty(),
                   ignore.empty() ? 0 : ignore[0]};
}

absl::Status BadLabel(const Node& node, int64_t label, int64_t classes) {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(),
                                                 "): label ", label, " is outside [0, ", classes,
                                                 ")"));
}

absl::Status SoftmaxWithLoss(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(LabelView v, Labels(node, a.in_types[0]));
  double loss = 0.0;
  int64_t valid = 0;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t label = static_cast<int64_t>(a.in[1][o * v.inner + i]);
      if (v.has_ignore && label == v.ignore) continue;
      if (label < 0 || label >= v.classes) return BadLabel(node, label, v.classes);
      const float* x = a.in[0] + o * v.classes * v.inner + i;
      float max = x[0];
      for (int64_t c = 1; c < v.classes; ++c) max = std::max(max, x[c * v.inner]);
      double sum = 0.0;
      for (int64_t c = 0; c < v.classes; ++c) sum += std::exp(double{x[c * v.inner]} - max);
      const double p = std::exp(double{x[label * v.inner]} - max) / sum;
      loss -= std::log(std::max(p, double{FLT_MIN}));
      ++valid;
    }
  }
  const std::string& mode = node.GetString("normalization");
  double normalizer = mode == "full"         ? static_cast<double>(v.outer * v.inner)
                      : mode == "valid"      ? static_cast<double>(valid)
                      : mode == "batch_size" ? static_cast<double>(v.outer)
                                             : 1.0;
  a.out[0][0] = static_cast<float>(loss / std::max(1.0, normalizer));
  return absl::OkStatus();
}

absl::Status Accuracy(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(LabelView v, Labels(node, a.in_types[0]));
  const int64_t top_k = node.GetInt("top_k");
  int64_t correct = 0, count = 0;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t label = static_cast<int64_t>(a.in[1][o * v.inner + i]);
      if (v.has_ignore && label == v.ignore) continue;
      if (label < 0 || label >= v.classes) return BadLabel(node, label, v.classes);
      const float* x = a.in[0] + o * v.classes * v.inner + i;
      // Correct when fewer than top_k classes score strictly higher than the label.
      int64_t better = 0;
      for (int64_t c = 0; c < v.classes; ++c) better += x[c * v.inner] > x[label * v.inner];
      correct += better < top_k;
      ++count;
    }
  }
  a.out[0][0] = count == 0 ? 0.0f : static_cast<float>(static_cast<double>(correct) / count);
  return absl::OkStatus();
}

absl::Status EuclideanLoss(const Node&, const DenseArgs& a) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.in_types[0].num_elements(); ++i) {
    const double d = double{a.in[0][i]} - a.in[1][i];
    sum += d * d;
  }
  a.out[0][0] = static_cast<float>(sum / (2.0 * a.in_types[0].dim(0)));
  return absl::OkStatus();
}

absl::Status SigmoidCrossEntropyLoss(const Node& node, const DenseArgs& a) {
  const auto& ignore = node.GetInts("ignore_label");
  const int64_t n = a.in_types[0].num_elements();
  double sum = 0.0;
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double t = a.in[1][i];
    if (!ignore.empty() && t == static_cast<double>(ignore[0])) continue;
    const double x = a.in[0][i];
    // log(1 + exp(-|x|)) form: exact for both signs without overflow.
    sum -= x * (t - (x >= 0 ? 1.0 : 0.0)) - std::log1p(std::exp(-std::fabs(x)));
    ++valid;
  }
  const std::string& norm = node.GetString("normalization");
  double normalizer = 1.0;
  if (norm == "full") normalizer = static_cast<double>(n);
  if (norm == "valid") normalizer = static_cast<double>(valid);
  if (norm == "batch_size") normalizer = static_cast<double>(a.in_types[0].dim(0));
  a.out[0][0] = static_cast<float>(sum / std::max(normalizer, 1.0));
  return absl::OkStatus();
}

absl::Status ContrastiveLoss(const Node& node, const DenseArgs& a) {
  const int64_t rows = a.in_types[0].dim(0);
  const int64_t width = a.in_types[0].num_elements() / rows;
  const double margin = node.GetFloat("margin");
  const bool legacy = node.GetBool("legacy_version");
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double d2 = 0.0;
    for (int64_t j = 0; j < width; ++j) {
      const double d = double{a.in[0][r * width + j]} - a.in[1][r * width + j];
      d2 += d * d;
    }
    if (a.in[2][r] != 0.0f) {
      sum += d2;
    } else if (legacy) {
      sum += std::max(margin - d2, 0.0);
    } else {
      const double gap = std::max(margin - std::sqrt(d2), 0.0);
      sum += gap * gap;
    }
  }
  a.out[0][0] = static_cast<float>(sum / (2.0 * static_cast<double>(rows)));
  return absl::OkStatus();
}

// Caffe's normalizers; never below 1.
double Normalizer(const std::string& mode, int64_t full, int64_t valid, int64_t batch) {
  const double n = mode == "full"         ? static_cast<double>(full)
                   : mode == "valid"      ? static_cast<double>(valid)
                   : mode == "batch_size" ? static_cast<double>(batch)
                                          : 1.0;
  return std::max(1.0, n);
}

absl::Status SoftmaxWithLossGradient(const Node& node, const DenseArgs& a) {
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

absl::Status EuclideanLossGradient(const Node& node, const DenseArgs& a) {
  const double scale = node.GetFloat("loss_weight") / static_cast<double>(a.in_types[0].dim(0));
  for (int64_t i = 0; i < a.in_types[0].num_elements(); ++i) {
    a.out[0][i] = static_cast<float>(scale * (double{a.in[0][i]} - a.in[1][i]));
  }
  return absl::OkStatus();
}

absl::Status SigmoidCrossEntropyLossGradient(const Node& node, const DenseArgs& a) {
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
absl::Status ContrastiveLossGradient(const Node& node, const DenseArgs& a) {
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

absl::Status RegisterReferenceLoss(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "SoftmaxWithLoss", SoftmaxWithLoss));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Accuracy", Accuracy));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "EuclideanLoss", EuclideanLoss));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "SigmoidCrossEntropyLoss", SigmoidCrossEntropyLoss));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "ContrastiveLoss", ContrastiveLoss));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "SoftmaxWithLossGradient", SoftmaxWithLossGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "EuclideanLossGradient", EuclideanLossGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "SigmoidCrossEntropyLossGradient",
                                         SigmoidCrossEntropyLossGradient));
  return RegisterReference(registry, "ContrastiveLossGradient", ContrastiveLossGradient);
}

}  // namespace kiln
