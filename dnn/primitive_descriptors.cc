#include "dnn/primitive_descriptors.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace dnn {

namespace {

absl::Status Invalid(absl::string_view what, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", detail));
}

absl::Status CheckFinite(const char* what, const char* field, double v) {
  if (std::isfinite(v)) return absl::OkStatus();
  return Invalid(what, absl::StrCat(field, " is ", v));
}

}  // namespace

absl::StatusOr<ActivationDescriptor> ActivationDescriptor::Create(ActivationMode mode,
                                                                  double coef) {
  const char* what = "activation descriptor";
  if (absl::Status s = CheckFinite(what, "coef", coef); !s.ok()) return s;
  if (mode == ActivationMode::kClippedRelu && !(coef > 0)) {
    return Invalid(what, absl::StrCat("clipped ReLU ceiling is ", coef, " (must be > 0)"));
  }
  if (mode == ActivationMode::kElu && coef < 0) {
    return Invalid(what, absl::StrCat("ELU alpha is ", coef, " (must be >= 0)"));
  }
  if (mode == ActivationMode::kPower) {
    return Invalid(what, "power activations are made with CreatePower");
  }
  ActivationDescriptor d;
  d.mode = mode;
  d.coef = coef;
  return d;
}

absl::StatusOr<ActivationDescriptor> ActivationDescriptor::CreatePower(double power, double scale,
                                                                       double shift) {
  const char* what = "power activation descriptor";
  for (auto [name, v] : {std::pair{"power", power}, {"scale", scale}, {"shift", shift}}) {
    if (absl::Status s = CheckFinite(what, name, v); !s.ok()) return s;
  }
  ActivationDescriptor d;
  d.mode = ActivationMode::kPower;
  d.power = power;
  d.scale = scale;
  d.shift = shift;
  return d;
}

std::string ActivationDescriptor::ToString() const {
  static const char* const kNames[] = {"relu", "clipped_relu", "sigmoid", "tanh",
                                       "elu",  "power",        "abs",     "identity"};
  std::string s = kNames[static_cast<int>(mode)];
  if (mode == ActivationMode::kPower)
    return absl::StrCat(s, "(", power, ",", scale, ",", shift, ")");
  if (coef != 0) absl::StrAppend(&s, "(", coef, ")");
  return s;
}

absl::StatusOr<PoolingDescriptor> PoolingDescriptor::Create(PoolingMode mode,
                                                            std::vector<int64_t> window,
                                                            std::vector<int64_t> pads,
                                                            std::vector<int64_t> strides,
                                                            PoolingRounding rounding) {
  const char* what = "pooling descriptor";
  const size_t nd = window.size();
  if (nd != 2 && nd != 3) {
    return Invalid(what, absl::StrCat(nd, " window dims (want 2 or 3 spatial dims)"));
  }
  if (pads.size() != nd || strides.size() != nd) {
    return Invalid(what, absl::StrCat(nd, " window dims, ", pads.size(), " pads, ", strides.size(),
                                      " strides (must all match)"));
  }
  for (size_t i = 0; i < nd; ++i) {
    if (window[i] < 1 || window[i] > (1 << 20)) {
      return Invalid(what, absl::StrCat("window dim ", i, " is ", window[i]));
    }
    if (strides[i] < 1 || strides[i] > (1 << 20)) {
      return Invalid(what, absl::StrCat("stride ", i, " is ", strides[i]));
    }
    // A pad as large as the window would let a window see only padding (Caffe refuses it too).
    if (pads[i] < 0 || pads[i] >= window[i]) {
      return Invalid(what, absl::StrCat("pad ", i, " is ", pads[i], " (must be in [0, window ",
                                        window[i], "))"));
    }
  }
  PoolingDescriptor d;
  d.mode = mode;
  d.rounding = rounding;
  d.window = std::move(window);
  d.pads = std::move(pads);
  d.strides = std::move(strides);
  return d;
}

PoolingDescriptor PoolingDescriptor::Global(PoolingMode mode, int spatial_rank) {
  PoolingDescriptor d;
  d.mode = mode;
  d.global = true;
  d.window.assign(spatial_rank, 1);
  d.pads.assign(spatial_rank, 0);
  d.strides.assign(spatial_rank, 1);
  return d;
}

PoolingDescriptor PoolingDescriptor::ResolvedFor(const TensorDescriptor& x) const {
  PoolingDescriptor d = *this;
  if (!global) return d;
  for (int i = 0; i < spatial_rank() && 2 + i < x.rank(); ++i) d.window[i] = x.dims[2 + i];
  return d;
}

std::string PoolingDescriptor::ToString() const {
  static const char* const kModes[] = {"max", "avg_include_pad", "avg_exclude_pad"};
  if (global) return absl::StrCat(kModes[static_cast<int>(mode)], " global");
  return absl::StrCat(kModes[static_cast<int>(mode)], " window [", absl::StrJoin(window, ","),
                      "] pad [", absl::StrJoin(pads, ","), "] stride [",
                      absl::StrJoin(strides, ","), "]",
                      rounding == PoolingRounding::kCeil ? " ceil" : "");
}

absl::StatusOr<std::vector<int64_t>> PoolingOutputDims(const PoolingDescriptor& pool,
                                                       const TensorDescriptor& x) {
  const int nd = pool.spatial_rank();
  if (x.rank() != nd + 2) {
    return Invalid("pooling", absl::StrCat("x has rank ", x.rank(), " but the pooling has ", nd,
                                           " spatial dims (want rank ", nd + 2, ")"));
  }
  const PoolingDescriptor p = pool.ResolvedFor(x);
  std::vector<int64_t> out = {x.dims[0], x.dims[1]};
  for (int i = 0; i < nd; ++i) {
    const int64_t in = x.dims[2 + i], padded = in + 2 * p.pads[i];
    if (padded < p.window[i]) {
      return Invalid("pooling",
                     absl::StrCat("spatial dim ", i, ": input ", in, " + 2 x pad ", p.pads[i],
                                  " is smaller than the window ", p.window[i]));
    }
    int64_t o;
    if (p.rounding == PoolingRounding::kFloor) {
      o = (padded - p.window[i]) / p.strides[i] + 1;
    } else {
      o = (padded - p.window[i] + p.strides[i] - 1) / p.strides[i] + 1;
      // Caffe's clip: the last window must start inside the input or its left padding.
      if (p.pads[i] > 0 && (o - 1) * p.strides[i] >= in + p.pads[i]) --o;
    }
    out.push_back(o);
  }
  return out;
}

absl::StatusOr<LrnDescriptor> LrnDescriptor::Create(LrnMode mode, int64_t size, double alpha,
                                                    double beta, double k) {
  const char* what = "LRN descriptor";
  if (size < 1 || size % 2 == 0 || size > 63) {
    return Invalid(what, absl::StrCat("size is ", size, " (must be odd, 1 to 63)"));
  }
  for (auto [name, v] : {std::pair{"alpha", alpha}, {"beta", beta}, {"k", k}}) {
    if (absl::Status s = CheckFinite(what, name, v); !s.ok()) return s;
  }
  if (mode == LrnMode::kAcrossChannels && !(k > 0) && alpha <= 0) {
    return Invalid(
        what, absl::StrCat("k is ", k, " with alpha ", alpha, " (the scale must stay positive)"));
  }
  LrnDescriptor d;
  d.mode = mode;
  d.size = size;
  d.alpha = alpha;
  d.beta = beta;
  d.k = k;
  return d;
}

std::string LrnDescriptor::ToString() const {
  return absl::StrCat(mode == LrnMode::kAcrossChannels ? "across" : "within", " size ", size,
                      " alpha ", alpha, " beta ", beta, " k ", k);
}

absl::StatusOr<DropoutDescriptor> DropoutDescriptor::Create(double ratio, uint64_t seed) {
  if (!(ratio >= 0 && ratio < 1)) {
    return Invalid("dropout descriptor", absl::StrCat("ratio is ", ratio, " (must be in [0, 1))"));
  }
  DropoutDescriptor d;
  d.ratio = ratio;
  d.seed = seed;
  return d;
}

}  // namespace dnn
}  // namespace kiln
