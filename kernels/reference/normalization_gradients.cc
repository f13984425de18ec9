// Reference backward of batch normalization: BatchNormGradient and AffineBatchNormGradient, the
// derivative of the forward loops in normalization.cc written out by hand.
#include <cmath>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// The batch's mean and 1 / σ of statistic c, as the forward computes them: from x, or the
// values an AffineBatchNorm forward saved.
struct BatchStatistics {
  double mean, inv;
};

BatchStatistics StatisticsOf(const float* x, int64_t n, int64_t stats, int64_t inner, int64_t c,
                             double eps) {
  const double m = static_cast<double>(n * inner);
  double sum = 0.0, sq = 0.0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const double v = x[(b * stats + c) * inner + i];
      sum += v;
      sq += v * v;
    }
  }
  const double mean = sum / m;
  return {mean, 1.0 / std::sqrt(std::max(0.0, sq / m - mean * mean) + eps)};
}

// The batch-statistics backward of statistic c of x and dy seen as [n, stats, inner]:
// dx = scale / σ (dy - Σdy / m - x̂ Σ(dy x̂) / m), with σ and x̂ from the batch's own mean and
// (biased) variance. Returns {Σ dy x̂, Σ dy}: the scale's and the bias's gradients.
std::pair<double, double> BatchStatisticsBackward(const float* x, const float* dy, float* dx,
                                                  int64_t n, int64_t stats, int64_t inner,
                                                  int64_t c, BatchStatistics s, double scale) {
  auto at = [&](int64_t b, int64_t i) { return (b * stats + c) * inner + i; };
  const double m = static_cast<double>(n * inner);
  const double mean = s.mean, inv = s.inv;
  double dy_sum = 0.0, dy_xhat = 0.0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      dy_sum += dy[at(b, i)];
      dy_xhat += dy[at(b, i)] * (x[at(b, i)] - mean) * inv;
    }
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const double xhat = (x[at(b, i)] - mean) * inv;
      dx[at(b, i)] =
          static_cast<float>(scale * inv * (dy[at(b, i)] - dy_sum / m - xhat * dy_xhat / m));
    }
  }
  return {dy_xhat, dy_sum};
}

// Batch statistics: dx = (dy - mean(dy) - x̂ mean(dy x̂)) / σ per statistic; stored statistics
// are constants: dx = dy / σ.
absl::Status BatchNorm(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const bool spatial = node.GetString("mode") == "spatial";
  const double eps = node.GetFloat("eps");
  const int64_t n = t.dim(0);
  const int64_t stats = spatial ? t.dim(1) : ProductOfDims(t.dims(), 1, t.rank());
  const int64_t inner = spatial ? ProductOfDims(t.dims(), 2, t.rank()) : 1;
  for (int64_t c = 0; c < stats; ++c) {
    if (!node.GetBool("use_global_stats")) {
      BatchStatisticsBackward(a.in[0], a.in[1], a.out[0], n, stats, inner, c,
                              StatisticsOf(a.in[0], n, stats, inner, c, eps), 1.0);
      continue;
    }
    double factor = 1.0;
    if (a.in.size() == 5) factor = a.in[4][0] == 0.0f ? 0.0 : 1.0 / a.in[4][0];
    const double inv = 1.0 / std::sqrt(a.in[3][c] * factor + eps);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * stats + c) * inner + i;
        a.out[0][at] = static_cast<float>(a.in[1][at] * inv);
      }
    }
  }
  return absl::OkStatus();
}

// dscale = Σ dy x̂, dbias = Σ dy, dx = scale / σ (dy - dbias / m - x̂ dscale / m), per channel,
// with the mean and 1 / σ the forward saved (inputs 3 and 4). With "relu", dy is first zeroed
// where the fused output y (input 5) is not positive: the ReLU's backward, as Caffe's reads it.
absl::Status AffineBatchNorm(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const int64_t n = t.dim(0), channels = t.dim(1);
  const int64_t inner = ProductOfDims(t.dims(), 2, t.rank());
  const float* dy = a.in[1];
  std::vector<float> masked;
  if (node.GetBool("relu")) {
    masked.assign(a.in[1], a.in[1] + t.num_elements());
    for (size_t i = 0; i < masked.size(); ++i) {
      if (!(a.in[5][i] > 0.0f)) masked[i] = 0.0f;
    }
    dy = masked.data();
  }
  for (int64_t c = 0; c < channels; ++c) {
    const BatchStatistics saved{a.in[3][c], a.in[4][c]};
    const auto [dscale, dbias] =
        BatchStatisticsBackward(a.in[0], dy, a.out[0], n, channels, inner, c, saved, a.in[2][c]);
    a.out[1][c] = static_cast<float>(dscale);
    a.out[2][c] = static_cast<float>(dbias);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceNormalizationGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "AffineBatchNormGradient", AffineBatchNorm));
  return RegisterReference(registry, "BatchNormGradient", BatchNorm);
}

}  // namespace kiln
