// The CPU oracle of LRN (across and within channels) and batch normalization.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "dnn/tensor_index.h"

namespace kiln {
namespace dnn {
namespace reference {

namespace {

// Calls visit(offset) for each element in `lrn`'s window around `index` (zero padding: elements
// outside the tensor are skipped), and returns the window's divisor (size or size^2...).
template <class F>
double ForEachInLrnWindow(const LrnDescriptor& lrn, const Desc& d,
                          const std::vector<int64_t>& index, F visit) {
  const int64_t half = lrn.size / 2;
  std::vector<int64_t> at = index;
  if (lrn.mode == LrnMode::kAcrossChannels) {
    for (int64_t c = index[1] - half; c <= index[1] + half; ++c) {
      if (c < 0 || c >= d.dims[1]) continue;
      at[1] = c;
      visit(OffsetOf(d.strides, at));
    }
    return static_cast<double>(lrn.size);
  }
  // Within channel: a size^(spatial rank) box over every spatial dim.
  std::vector<int64_t> window(d.rank() - 2, 2 * half + 1);
  double count = 1;
  for (size_t i = 0; i < window.size(); ++i) count *= static_cast<double>(lrn.size);
  ForEachIndex(window, [&](const std::vector<int64_t>& w) {
    for (size_t i = 0; i < w.size(); ++i) {
      const int64_t pos = index[2 + i] + w[i] - half;
      if (pos < 0 || pos >= d.dims[2 + i]) return;
      at[2 + i] = pos;
    }
    visit(OffsetOf(d.strides, at));
  });
  return count;
}

double LrnScale(const LrnDescriptor& lrn, const Desc& xd, const double* x,
                const std::vector<int64_t>& index) {
  double sum = 0;
  const double count =
      ForEachInLrnWindow(lrn, xd, index, [&](int64_t off) { sum += x[off] * x[off]; });
  const double k = lrn.mode == LrnMode::kAcrossChannels ? lrn.k : 1.0;
  return k + lrn.alpha / count * sum;
}

}  // namespace

absl::Status LrnForward(const LrnDescriptor& lrn, double alpha, const Desc& xd, const double* x,
                        double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckLrn(lrn, xd, "LrnForward"));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "LrnForward"));
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const double v = x[OffsetOf(xd.strides, i)] * std::pow(LrnScale(lrn, xd, x, i), -lrn.beta);
    Blend(alpha, v, beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status LrnBackward(const LrnDescriptor& lrn, double alpha, const Desc& yd, const double* y,
                         const Desc& dyd, const double* dy, const Desc& xd, const double* x,
                         double beta, const Desc& dxd, double* dx) {
  const char* where = "LrnBackward";
  KILN_RETURN_IF_ERROR(CheckLrn(lrn, xd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  // ratio[t] = dy_t y_t / scale_t with y_t = x_t scale_t^-beta recomputed from x (y itself is not
  // read: the gradient is LRN's whatever the forward blended into y), dense in x's layout; the
  // windows are symmetric, so the elements whose windows hold x_i are those of x_i's own window.
  (void)y;
  std::vector<double> ratio(xd.ElementSpan(), 0.0);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const double scale = LrnScale(lrn, xd, x, i);
    ratio[OffsetOf(xd.strides, i)] = dy[OffsetOf(dyd.strides, i)] * x[OffsetOf(xd.strides, i)] *
                                     std::pow(scale, -lrn.beta) / scale;
  });
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    double sum = 0;
    const double count = ForEachInLrnWindow(lrn, xd, i, [&](int64_t off) { sum += ratio[off]; });
    const double xi = x[OffsetOf(xd.strides, i)];
    const double g = dy[OffsetOf(dyd.strides, i)] * std::pow(LrnScale(lrn, xd, x, i), -lrn.beta) -
                     2.0 * lrn.alpha * lrn.beta / count * xi * sum;
    Blend(alpha, g, beta, dx + OffsetOf(dxd.strides, i));
  });
  return absl::OkStatus();
}

namespace {

// The feature (index into the parameter tensor, row-major) of element `index` of x.
int64_t FeatureOf(BatchNormMode mode, const Desc& xd, const std::vector<int64_t>& index) {
  if (mode == BatchNormMode::kSpatial) return index[1];
  int64_t f = 0;
  for (int i = 1; i < xd.rank(); ++i) f = f * xd.dims[i] + index[i];
  return f;
}

int64_t FeatureCount(BatchNormMode mode, const Desc& xd) {
  return mode == BatchNormMode::kSpatial ? xd.dims[1] : xd.ElementCount() / xd.dims[0];
}

// Offsets in the parameter tensor of each feature, in feature order.
std::vector<int64_t> ParamOffsets(const Desc& pd) {
  std::vector<int64_t> offsets;
  ForEachIndex(pd.dims,
               [&](const std::vector<int64_t>& i) { offsets.push_back(OffsetOf(pd.strides, i)); });
  return offsets;
}

struct Moments {
  std::vector<double> mean, var;  // var is biased (divided by the count)
  double count = 0;
};

Moments MomentsOf(BatchNormMode mode, const Desc& xd, const double* x) {
  const int64_t features = FeatureCount(mode, xd);
  Moments m;
  m.mean.assign(features, 0.0);
  m.var.assign(features, 0.0);
  m.count = static_cast<double>(xd.ElementCount() / features);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    m.mean[FeatureOf(mode, xd, i)] += x[OffsetOf(xd.strides, i)];
  });
  for (double& v : m.mean) v /= m.count;
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const int64_t f = FeatureOf(mode, xd, i);
    const double c = x[OffsetOf(xd.strides, i)] - m.mean[f];
    m.var[f] += c * c;
  });
  for (double& v : m.var) v /= m.count;
  return m;
}

// Whether a training call fuses a ReLU, or why it cannot (the GPU primitive's one activation).
absl::StatusOr<bool> FusedRelu(const BatchNormTraining& bn, const char* where) {
  if (bn.ops == BatchNormOps::kBatchNorm) return false;
  if (bn.activation.mode != ActivationMode::kRelu || bn.activation.coef != 0) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": only a ReLU with slope 0 is implemented as a fused activation"));
  }
  return true;
}

}  // namespace

absl::Status BatchNormForwardTraining(const BatchNormTraining& bn, double alpha, double beta,
                                      const Desc& xd, const double* x, const Desc& yd, double* y,
                                      const Desc& pd, const double* scale, const double* bias,
                                      double* running_mean, double* running_var,
                                      double* caffe_scale_factor, double* save_mean,
                                      double* save_inv_std) {
  const char* where = "BatchNormForwardTraining";
  KILN_RETURN_IF_ERROR(CheckBatchNorm(bn.mode, xd, yd, pd, bn.epsilon, where));
  KILN_ASSIGN_OR_RETURN(const bool relu, FusedRelu(bn, where));
  if (bn.rule == RunningStatsRule::kCaffeSum && running_mean && !caffe_scale_factor) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": Caffe's running sums need the scale-factor element"));
  }
  const Moments m = MomentsOf(bn.mode, xd, x);
  const std::vector<int64_t> po = ParamOffsets(pd);
  std::vector<double> inv_std(m.var.size());
  for (size_t f = 0; f < m.var.size(); ++f) inv_std[f] = 1.0 / std::sqrt(m.var[f] + bn.epsilon);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const int64_t f = FeatureOf(bn.mode, xd, i);
    const double v =
        scale[po[f]] * (x[OffsetOf(xd.strides, i)] - m.mean[f]) * inv_std[f] + bias[po[f]];
    Blend(alpha, relu ? std::max(0.0, v) : v, beta, y + OffsetOf(yd.strides, i));
  });
  const double unbias = m.count > 1 ? m.count / (m.count - 1) : 1.0;
  for (size_t f = 0; f < m.mean.size(); ++f) {
    if (save_mean) save_mean[po[f]] = m.mean[f];
    if (save_inv_std) save_inv_std[po[f]] = inv_std[f];
    if (!running_mean || !running_var) continue;
    if (bn.rule == RunningStatsRule::kExponential) {
      running_mean[po[f]] = (1 - bn.factor) * running_mean[po[f]] + bn.factor * m.mean[f];
      running_var[po[f]] = (1 - bn.factor) * running_var[po[f]] + bn.factor * unbias * m.var[f];
    } else {
      running_mean[po[f]] = bn.factor * running_mean[po[f]] + m.mean[f];
      running_var[po[f]] = bn.factor * running_var[po[f]] + unbias * m.var[f];
    }
  }
  if (bn.rule == RunningStatsRule::kCaffeSum && running_mean && running_var) {
    *caffe_scale_factor = bn.factor * *caffe_scale_factor + 1;
  }
  return absl::OkStatus();
}

absl::Status BatchNormForwardInference(BatchNormMode mode, double alpha, double beta,
                                       const Desc& xd, const double* x, const Desc& yd, double* y,
                                       const Desc& pd, const double* scale, const double* bias,
                                       const double* mean, const double* var, double epsilon,
                                       const double* caffe_scale_factor) {
  KILN_RETURN_IF_ERROR(CheckBatchNorm(mode, xd, yd, pd, epsilon, "BatchNormForwardInference"));
  const std::vector<int64_t> po = ParamOffsets(pd);
  double s = 1;
  if (caffe_scale_factor) s = *caffe_scale_factor == 0 ? 0 : 1 / *caffe_scale_factor;
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const int64_t p = po[FeatureOf(mode, xd, i)];
    const double v =
        scale[p] * (x[OffsetOf(xd.strides, i)] - s * mean[p]) / std::sqrt(s * var[p] + epsilon) +
        bias[p];
    Blend(alpha, v, beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status BatchNormBackward(BatchNormMode mode, double alpha_data, double beta_data,
                               double alpha_param, double beta_param, const Desc& xd,
                               const double* x, const Desc& dyd, const double* dy, const Desc& dxd,
                               double* dx, const Desc& pd, const double* scale, double* dscale,
                               double* dbias, double epsilon, const double* saved_mean,
                               const double* saved_inv_std) {
  BatchNormTraining bn;
  bn.mode = mode;
  bn.epsilon = epsilon;
  return BatchNormBackward(bn, alpha_data, beta_data, alpha_param, beta_param, xd, x, xd, nullptr,
                           dyd, dy, dxd, dx, pd, scale, dscale, dbias, saved_mean, saved_inv_std);
}

absl::Status BatchNormBackward(const BatchNormTraining& bn, double alpha_data, double beta_data,
                               double alpha_param, double beta_param, const Desc& xd,
                               const double* x, const Desc& yd, const double* y, const Desc& dyd,
                               const double* dy_in, const Desc& dxd, double* dx, const Desc& pd,
                               const double* scale, double* dscale, double* dbias,
                               const double* saved_mean, const double* saved_inv_std) {
  const char* where = "BatchNormBackward";
  const BatchNormMode mode = bn.mode;
  const double epsilon = bn.epsilon;
  KILN_RETURN_IF_ERROR(CheckBatchNorm(mode, xd, dyd, pd, epsilon, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  KILN_ASSIGN_OR_RETURN(const bool relu, FusedRelu(bn, where));
  if (relu) {
    KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
    if (y == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": y is missing"));
  }
  // dy as the batch norm sees it: through the ReLU's derivative at y when one is fused.
  auto dy = [&](const std::vector<int64_t>& i) {
    if (relu && !(y[OffsetOf(yd.strides, i)] > 0)) return 0.0;
    return dy_in[OffsetOf(dyd.strides, i)];
  };
  const std::vector<int64_t> po = ParamOffsets(pd);
  const int64_t features = FeatureCount(mode, xd);
  std::vector<double> mean(features), inv_std(features);
  const Moments m = MomentsOf(mode, xd, x);
  for (int64_t f = 0; f < features; ++f) {
    const bool saved = saved_mean && saved_inv_std;
    mean[f] = saved ? saved_mean[po[f]] : m.mean[f];
    inv_std[f] = saved ? saved_inv_std[po[f]] : 1.0 / std::sqrt(m.var[f] + epsilon);
  }
  std::vector<double> sum_dy(features, 0.0), sum_dy_xhat(features, 0.0);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const int64_t f = FeatureOf(mode, xd, i);
    const double g = dy(i);
    sum_dy[f] += g;
    sum_dy_xhat[f] += g * (x[OffsetOf(xd.strides, i)] - mean[f]) * inv_std[f];
  });
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const int64_t f = FeatureOf(mode, xd, i);
    const double xhat = (x[OffsetOf(xd.strides, i)] - mean[f]) * inv_std[f];
    const double g =
        scale[po[f]] * inv_std[f] / m.count * (m.count * dy(i) - sum_dy[f] - xhat * sum_dy_xhat[f]);
    Blend(alpha_data, g, beta_data, dx + OffsetOf(dxd.strides, i));
  });
  for (int64_t f = 0; f < features; ++f) {
    Blend(alpha_param, sum_dy_xhat[f], beta_param, dscale + po[f]);
    Blend(alpha_param, sum_dy[f], beta_param, dbias + po[f]);
  }
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
