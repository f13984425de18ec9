// The CPU oracle of the element-wise primitives: activations, PReLU, dropout, tensor ops,
// eltwise and the inner product.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/activation_math.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "dnn/tensor_index.h"
#include "base/dropout_mask.h"

namespace kiln {
namespace dnn {
namespace reference {

namespace {

ActivationParams<double> ParamsOf(const ActivationDescriptor& act) {
  ActivationParams<double> p;
  p.kind = static_cast<int>(act.mode);
  p.coef = act.coef;
  p.power = act.power;
  p.scale = act.scale;
  p.shift = act.shift;
  return p;
}

// The offset in a broadcast tensor `b` of the element at index `index` of the full tensor.
int64_t BroadcastOffset(const Desc& b, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (int i = 0; i < b.rank(); ++i) offset += (b.dims[i] == 1 ? 0 : index[i]) * b.strides[i];
  return offset;
}

// Sums of `values(index)` per element of the broadcast tensor `b`, laid out densely in b's
// row-major order.
template <class F>
std::vector<double> SumOverBroadcast(const Desc& full, const Desc& b, F values) {
  std::vector<double> sums(b.ElementCount(), 0.0);
  ForEachIndex(full.dims, [&](const std::vector<int64_t>& index) {
    int64_t dense = 0;
    for (int i = 0; i < b.rank(); ++i) dense = dense * b.dims[i] + (b.dims[i] == 1 ? 0 : index[i]);
    sums[dense] += values(index);
  });
  return sums;
}

// Writes dense row-major `sums` into `out` (laid out as `d`) with blending.
void BlendDense(const std::vector<double>& sums, double alpha, double beta, const Desc& d,
                double* out) {
  int64_t dense = 0;
  ForEachIndex(d.dims, [&](const std::vector<int64_t>& index) {
    Blend(alpha, sums[dense++], beta, out + OffsetOf(d.strides, index));
  });
}

}  // namespace

absl::Status ActivationForward(const ActivationDescriptor& act, double alpha, const Desc& xd,
                               const double* x, double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "ActivationForward"));
  const ActivationParams<double> p = ParamsOf(act);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    Blend(alpha, ActivationValue(p, x[OffsetOf(xd.strides, i)]), beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status ActivationBackward(const ActivationDescriptor& act, double alpha, const Desc& yd,
                                const double* y, const Desc& dyd, const double* dy, const Desc& xd,
                                const double* x, double beta, const Desc& dxd, double* dx) {
  const char* where = "ActivationBackward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  const ActivationParams<double> p = ParamsOf(act);
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const double g = ActivationGradient(p, y[OffsetOf(yd.strides, i)], dy[OffsetOf(dyd.strides, i)],
                                        x[OffsetOf(xd.strides, i)]);
    Blend(alpha, g, beta, dx + OffsetOf(dxd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status PReluForward(const Desc& xd, const double* x, const Desc& slope_d, const double* slope,
                          double alpha, double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "PReluForward"));
  KILN_RETURN_IF_ERROR(CheckBroadcastable(slope_d, "slope", xd, "x", "PReluForward"));
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const double v = x[OffsetOf(xd.strides, i)];
    Blend(alpha, v > 0 ? v : slope[BroadcastOffset(slope_d, i)] * v, beta,
          y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status PReluBackward(const Desc& xd, const double* x, const Desc& dyd, const double* dy,
                           const Desc& slope_d, const double* slope, double alpha, double beta,
                           const Desc& dxd, double* dx, double alpha_param, double beta_param,
                           double* dslope) {
  const char* where = "PReluBackward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  KILN_RETURN_IF_ERROR(CheckBroadcastable(slope_d, "slope", xd, "x", where));
  const std::vector<double> sums = SumOverBroadcast(xd, slope_d, [&](const auto& i) {
    const double v = x[OffsetOf(xd.strides, i)];
    return v <= 0 ? dy[OffsetOf(dyd.strides, i)] * v : 0.0;
  });
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const double v = x[OffsetOf(xd.strides, i)], g = dy[OffsetOf(dyd.strides, i)];
    Blend(alpha, v > 0 ? g : slope[BroadcastOffset(slope_d, i)] * g, beta,
          dx + OffsetOf(dxd.strides, i));
  });
  BlendDense(sums, alpha_param, beta_param, slope_d, dslope);
  return absl::OkStatus();
}

absl::Status DropoutForward(const DropoutDescriptor& dropout, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "DropoutForward"));
  const float ratio = static_cast<float>(dropout.ratio);
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(ratio));
  uint64_t e = 0;
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    const bool keep = DropoutKeep(dropout.seed, e++, ratio);
    Blend(alpha, keep ? x[OffsetOf(xd.strides, i)] * keep_scale : 0.0, beta,
          y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status TransformTensor(double alpha, const Desc& xd, const double* x, double beta,
                             const Desc& yd, double* y) {
  if (xd.dims != yd.dims) {
    return absl::InvalidArgumentError(absl::StrCat("TransformTensor: x ", xd.ToString(), " and y ",
                                                   yd.ToString(), " differ in dims"));
  }
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    Blend(alpha, x[OffsetOf(xd.strides, i)], beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status AddTensor(double alpha, const Desc& bd, const double* b, double beta, const Desc& yd,
                       double* y) {
  KILN_RETURN_IF_ERROR(CheckBroadcastable(bd, "b", yd, "y", "AddTensor"));
  ForEachIndex(yd.dims, [&](const std::vector<int64_t>& i) {
    Blend(alpha, b[BroadcastOffset(bd, i)], beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status ScaleTensor(const Desc& yd, double* y, double alpha) {
  ForEachIndex(yd.dims,
               [&](const std::vector<int64_t>& i) { y[OffsetOf(yd.strides, i)] *= alpha; });
  return absl::OkStatus();
}

absl::Status ReduceTensorSum(double alpha, const Desc& dyd, const double* dy, double beta,
                             const Desc& dbd, double* db) {
  KILN_RETURN_IF_ERROR(CheckBroadcastable(dbd, "db", dyd, "dy", "ReduceTensorSum"));
  BlendDense(
      SumOverBroadcast(dyd, dbd, [&](const auto& i) { return dy[OffsetOf(dyd.strides, i)]; }),
      alpha, beta, dbd, db);
  return absl::OkStatus();
}

absl::Status EltwiseForward(EltwiseOp op, const std::vector<double>& coefficients, double alpha,
                            const std::vector<Desc>& xds, const std::vector<const double*>& xs,
                            double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckEltwise(op, xds, coefficients, yd, "EltwiseForward"));
  ForEachIndex(yd.dims, [&](const std::vector<int64_t>& i) {
    double r = op == EltwiseOp::kProd ? 1.0 : 0.0;
    for (size_t j = 0; j < xs.size(); ++j) {
      const double v = xs[j][OffsetOf(xds[j].strides, i)];
      if (op == EltwiseOp::kSum) r += (coefficients.empty() ? 1.0 : coefficients[j]) * v;
      if (op == EltwiseOp::kProd) r *= v;
      if (op == EltwiseOp::kMax) r = j == 0 || v > r ? v : r;
    }
    Blend(alpha, r, beta, y + OffsetOf(yd.strides, i));
  });
  return absl::OkStatus();
}

absl::Status EltwiseBackward(EltwiseOp op, const std::vector<double>& coefficients, int which,
                             double alpha, const std::vector<Desc>& xds,
                             const std::vector<const double*>& xs, const Desc& dyd,
                             const double* dy, double beta, const Desc& dxd, double* dx) {
  const char* where = "EltwiseBackward";
  KILN_RETURN_IF_ERROR(CheckEltwise(op, xds, coefficients, dyd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(dyd, "dy", dxd, "dx", where));
  if (which < 0 || which >= static_cast<int>(xs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": input ", which, " of ", xs.size()));
  }
  ForEachIndex(dyd.dims, [&](const std::vector<int64_t>& i) {
    const double g = dy[OffsetOf(dyd.strides, i)];
    double r = 0;
    if (op == EltwiseOp::kSum) {
      r = (coefficients.empty() ? 1.0 : coefficients[which]) * g;
    } else if (op == EltwiseOp::kProd) {
      r = g;
      for (size_t j = 0; j < xs.size(); ++j) {
        if (static_cast<int>(j) != which) r *= xs[j][OffsetOf(xds[j].strides, i)];
      }
    } else {
      size_t arg = 0;
      double best = xs[0][OffsetOf(xds[0].strides, i)];
      for (size_t j = 1; j < xs.size(); ++j) {
        const double v = xs[j][OffsetOf(xds[j].strides, i)];
        if (v > best) best = v, arg = j;
      }
      r = static_cast<int>(arg) == which ? g : 0.0;
    }
    Blend(alpha, r, beta, dx + OffsetOf(dxd.strides, i));
  });
  return absl::OkStatus();
}

namespace {

// Element (row, col) of a tensor flattened at `axis`: row indexes dims [0, axis), col the rest.
int64_t FlatOffset(const Desc& d, int axis, int64_t row, int64_t col) {
  int64_t offset = 0;
  for (int i = d.rank() - 1; i >= axis; --i) {
    offset += (col % d.dims[i]) * d.strides[i];
    col /= d.dims[i];
  }
  for (int i = axis - 1; i >= 0; --i) {
    offset += (row % d.dims[i]) * d.strides[i];
    row /= d.dims[i];
  }
  return offset;
}

int64_t WeightOffset(const Desc& wd, bool transposed, int64_t out, int64_t k) {
  return transposed ? k * wd.strides[0] + out * wd.strides[1]
                    : out * wd.strides[0] + k * wd.strides[1];
}

}  // namespace

absl::Status InnerProductForward(int axis, bool transposed, double alpha, const Desc& xd,
                                 const double* x, const Desc& wd, const double* w,
                                 const double* bias, double beta, const Desc& yd, double* y) {
  KILN_ASSIGN_OR_RETURN(InnerProductShape s,
                        CheckInnerProduct(axis, transposed, xd, wd, yd, "InnerProductForward"));
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t n = 0; n < s.n; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < s.k; ++k) {
        acc += x[FlatOffset(xd, axis, m, k)] * w[WeightOffset(wd, transposed, n, k)];
      }
      Blend(alpha, acc, beta, y + FlatOffset(yd, axis, m, n));
    }
  }
  return absl::OkStatus();
}

absl::Status InnerProductBackwardData(int axis, bool transposed, double alpha, const Desc& dyd,
                                      const double* dy, const Desc& wd, const double* w,
                                      double beta, const Desc& dxd, double* dx) {
  KILN_ASSIGN_OR_RETURN(InnerProductShape s, CheckInnerProduct(axis, transposed, dxd, wd, dyd,
                                                               "InnerProductBackwardData"));
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t k = 0; k < s.k; ++k) {
      double acc = 0;
      for (int64_t n = 0; n < s.n; ++n) {
        acc += dy[FlatOffset(dyd, axis, m, n)] * w[WeightOffset(wd, transposed, n, k)];
      }
      Blend(alpha, acc, beta, dx + FlatOffset(dxd, axis, m, k));
    }
  }
  return absl::OkStatus();
}

absl::Status InnerProductBackwardFilter(int axis, bool transposed, double alpha, const Desc& xd,
                                        const double* x, const Desc& dyd, const double* dy,
                                        double beta, const Desc& dwd, double* dw) {
  KILN_ASSIGN_OR_RETURN(InnerProductShape s, CheckInnerProduct(axis, transposed, xd, dwd, dyd,
                                                               "InnerProductBackwardFilter"));
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t k = 0; k < s.k; ++k) {
      double acc = 0;
      for (int64_t m = 0; m < s.m; ++m) {
        acc += dy[FlatOffset(dyd, axis, m, n)] * x[FlatOffset(xd, axis, m, k)];
      }
      Blend(alpha, acc, beta, dw + WeightOffset(dwd, transposed, n, k));
    }
  }
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
