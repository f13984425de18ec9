// Reference LRN (both regions) through the primitive library's oracle (see dnn_oracle.h),
// BatchNorm (stored, Caffe-accumulated or batch statistics) and AffineBatchNorm.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/lrn.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status Lrn(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::LrnPlan p, dnn_plans::PlanLrn(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::LrnForward(p.lrn, 1.0, p.xd, d.in(0), 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

absl::Status BatchNorm(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const bool spatial = node.GetString("mode") == "spatial";
  const double eps = node.GetFloat("eps");
  // x viewed as [n, stats, inner]: one statistic per middle index.
  const int64_t n = t.dim(0);
  const int64_t stats = spatial ? t.dim(1) : ProductOfDims(t.dims(), 1, t.rank());
  const int64_t inner = spatial ? ProductOfDims(t.dims(), 2, t.rank()) : 1;
  std::vector<double> mean(stats), var(stats);
  if (node.GetBool("use_global_stats")) {
    double factor = 1.0;
    if (a.in.size() == 4) {
      // Caffe stores running sums and their weight; a zero weight means "no statistics yet".
      const double s = a.in[3][0];
      factor = s == 0.0 ? 0.0 : 1.0 / s;
    }
    for (int64_t c = 0; c < stats; ++c) {
      mean[c] = a.in[1][c] * factor;
      var[c] = a.in[2][c] * factor;
    }
  } else {
    const double m = static_cast<double>(n * inner);
    for (int64_t c = 0; c < stats; ++c) {
      double sum = 0.0, sq = 0.0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double v = a.in[0][(b * stats + c) * inner + i];
          sum += v;
          sq += v * v;
        }
      }
      mean[c] = sum / m;
      var[c] = std::max(0.0, sq / m - mean[c] * mean[c]);  // Biased, as Caffe normalizes.
    }
    if (node.GetBool("update_running_stats")) {
      // Caffe's running sums: the variance enters unbiased (m / (m - 1)).
      const double maf = node.GetFloat("moving_average_fraction");
      const double unbias = m > 1 ? m / (m - 1) : 1.0;
      for (int64_t c = 0; c < stats; ++c) {
        a.out[1][c] = static_cast<float>(maf * a.in[1][c] + mean[c]);
        a.out[2][c] = static_cast<float>(maf * a.in[2][c] + unbias * var[c]);
      }
      a.out[3][0] = static_cast<float>(maf * a.in[3][0] + 1.0);
    }
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < stats; ++c) {
      const double inv = 1.0 / std::sqrt(var[c] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * stats + c) * inner + i;
        a.out[0][at] = static_cast<float>((a.in[0][at] - mean[c]) * inv);
      }
    }
  }
  return absl::OkStatus();
}

// Batch statistics per channel, then y = scale (x - mean) / sqrt(var + eps) + bias; the running
// statistics as BatchNorm updates them, and the mean and 1 / sqrt(var + eps) saved for backward
// (the last two outputs). With "relu", y = max(0, y).
absl::Status AffineBatchNorm(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const double eps = node.GetFloat("eps");
  const int64_t n = t.dim(0), channels = t.dim(1);
  const int64_t inner = ProductOfDims(t.dims(), 2, t.rank());
  const double m = static_cast<double>(n * inner);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0, sq = 0.0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const double v = a.in[0][(b * channels + c) * inner + i];
        sum += v;
        sq += v * v;
      }
    }
    const double mean = sum / m;
    const double var = std::max(0.0, sq / m - mean * mean);
    const double inv = 1.0 / std::sqrt(var + eps);
    const size_t saved = a.out.size() - 2;
    a.out[saved][c] = static_cast<float>(mean);
    a.out[saved + 1][c] = static_cast<float>(inv);
    const double scale = a.in[4][c], bias = a.in[5][c];
    const bool relu = node.GetBool("relu");
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * channels + c) * inner + i;
        const double y = scale * (a.in[0][at] - mean) * inv + bias;
        a.out[0][at] = static_cast<float>(relu ? std::max(0.0, y) : y);
      }
    }
    if (node.GetBool("update_running_stats")) {
      const double maf = node.GetFloat("moving_average_fraction");
      a.out[1][c] = static_cast<float>(maf * a.in[1][c] + mean);
      a.out[2][c] = static_cast<float>(maf * a.in[2][c] + (m > 1 ? m / (m - 1) : 1.0) * var);
    }
  }
  if (node.GetBool("update_running_stats")) {
    a.out[3][0] = static_cast<float>(node.GetFloat("moving_average_fraction") * a.in[3][0] + 1.0);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceNormalization(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "LRN", Lrn));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "AffineBatchNorm", AffineBatchNorm));
  return RegisterReference(registry, "BatchNorm", BatchNorm);
}

}  // namespace kiln
