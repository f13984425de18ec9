#include "dnn/primitive_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace dnn {

namespace {

absl::Status Invalid(const char* where, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", detail));
}

}  // namespace

absl::Status CheckSameShape(const TensorDescriptor& a, const char* a_name,
                            const TensorDescriptor& b, const char* b_name, const char* where) {
  if (a.dims == b.dims && a.dtype == b.dtype) return absl::OkStatus();
  return Invalid(where, absl::StrCat(b_name, " ", b.ToString(), " does not match ", a_name, " ",
                                     a.ToString(), " (want the same dims and dtype)"));
}

absl::Status CheckBroadcastable(const TensorDescriptor& b, const char* b_name,
                                const TensorDescriptor& a, const char* a_name, const char* where) {
  bool ok = b.rank() == a.rank();
  for (int i = 0; ok && i < b.rank(); ++i) ok = b.dims[i] == 1 || b.dims[i] == a.dims[i];
  if (ok) return absl::OkStatus();
  return Invalid(where,
                 absl::StrCat(b_name, " ", b.ToString(), " does not broadcast onto ", a_name, " ",
                              a.ToString(), " (want the same rank, each dim 1 or equal)"));
}

absl::Status CheckPooling(const PoolingDescriptor& pool, const TensorDescriptor& x,
                          const TensorDescriptor& y, const char* where) {
  absl::StatusOr<std::vector<int64_t>> dims = PoolingOutputDims(pool, x);
  if (!dims.ok()) return Invalid(where, dims.status().message());
  if (y.dims != *dims || y.dtype != x.dtype) {
    return Invalid(
        where, absl::StrCat("y ", y.ToString(), " should have dims [", absl::StrJoin(*dims, ","),
                            "] and x's dtype ", DataTypeName(x.dtype)));
  }
  return absl::OkStatus();
}

absl::Status CheckLrn(const LrnDescriptor& lrn, const TensorDescriptor& x, const char* where) {
  if (x.rank() < 3) {
    return Invalid(where, absl::StrCat("x ", x.ToString(), " has rank ", x.rank(),
                                       " (LRN wants N, C and at least one spatial dim)"));
  }
  (void)lrn;
  return absl::OkStatus();
}

absl::Status CheckBatchNormParam(BatchNormMode mode, const TensorDescriptor& x,
                                 const TensorDescriptor& param, const char* where) {
  if (x.rank() < 2) return Invalid(where, absl::StrCat("x ", x.ToString(), " has rank < 2"));
  std::vector<int64_t> want(x.dims.size(), 1);
  want[1] = x.dims[1];
  if (mode == BatchNormMode::kPerActivation) {
    for (int i = 2; i < x.rank(); ++i) want[i] = x.dims[i];
  }
  if (param.dims == want && param.dtype == DataType::kF32) return absl::OkStatus();
  return Invalid(where, absl::StrCat("scale/bias/mean/variance ", param.ToString(),
                                     " should be f32 with dims [", absl::StrJoin(want, ","), "]"));
}

absl::Status CheckBatchNorm(BatchNormMode mode, const TensorDescriptor& x,
                            const TensorDescriptor& y, const TensorDescriptor& param,
                            double epsilon, const char* where) {
  if (absl::Status s = CheckSameShape(x, "x", y, "y", where); !s.ok()) return s;
  if (absl::Status s = CheckBatchNormParam(mode, x, param, where); !s.ok()) return s;
  if (!(epsilon > 0)) return Invalid(where, absl::StrCat("epsilon is ", epsilon, " (must be > 0)"));
  return absl::OkStatus();
}

absl::Status CheckSoftmax(const SoftmaxDescriptor& softmax, const TensorDescriptor& x,
                          const char* where) {
  if (softmax.first_axis < 0 || softmax.first_axis > softmax.last_axis ||
      softmax.last_axis >= x.rank()) {
    return Invalid(where, absl::StrCat("axes [", softmax.first_axis, ", ", softmax.last_axis,
                                       "] are not within x's rank ", x.rank()));
  }
  return absl::OkStatus();
}

absl::Status CheckSoftmaxLoss(const SoftmaxLossDescriptor& loss, const TensorDescriptor& x,
                              const TensorDescriptor& labels, const char* where) {
  if (loss.axis < 0 || loss.axis >= x.rank()) {
    return Invalid(where, absl::StrCat("axis ", loss.axis, " is not within x's rank ", x.rank()));
  }
  std::vector<int64_t> want = x.dims;
  want[loss.axis] = 1;
  if (labels.dims != want) {
    return Invalid(where, absl::StrCat("labels ", labels.ToString(), " should have dims [",
                                       absl::StrJoin(want, ","), "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckEltwise(EltwiseOp op, const std::vector<TensorDescriptor>& xs,
                          const std::vector<double>& coefficients, const TensorDescriptor& y,
                          const char* where) {
  if (xs.empty() || xs.size() > static_cast<size_t>(kMaxEltwiseInputs)) {
    return Invalid(where, absl::StrCat(xs.size(), " inputs (want 1 to ", kMaxEltwiseInputs, ")"));
  }
  if (!coefficients.empty() && (op != EltwiseOp::kSum || coefficients.size() != xs.size())) {
    return Invalid(where, absl::StrCat(coefficients.size(), " coefficients for ", xs.size(),
                                       " inputs (only a sum takes them, one per input)"));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string name = absl::StrCat("input ", i);
    if (absl::Status s = CheckSameShape(y, "y", xs[i], name.c_str(), where); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckConcat(int axis, const std::vector<TensorDescriptor>& parts,
                         const TensorDescriptor& y, const char* where) {
  if (axis < 0 || axis >= y.rank()) {
    return Invalid(where, absl::StrCat("axis ", axis, " is not within y's rank ", y.rank()));
  }
  if (parts.empty()) return Invalid(where, "no parts");
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<int64_t> want = y.dims;
    want[axis] = parts[i].dims.size() == y.dims.size() ? parts[i].dims[axis] : 0;
    if (parts[i].dims != want || parts[i].dtype != y.dtype) {
      return Invalid(where, absl::StrCat("part ", i, " ", parts[i].ToString(), " does not fit ",
                                         y.ToString(), " along axis ", axis));
    }
    total += want[axis];
  }
  if (total != y.dims[axis]) {
    return Invalid(where, absl::StrCat("the parts add up to ", total, " along axis ", axis,
                                       " but y has ", y.dims[axis]));
  }
  return absl::OkStatus();
}

SubTensor SliceAlong(const TensorDescriptor& whole, int axis, int64_t offset, int64_t extent) {
  SubTensor sub;
  sub.desc = whole;
  sub.desc.dims[axis] = extent;
  sub.offset = offset * whole.strides[axis];
  return sub;
}

absl::StatusOr<InnerProductShape> CheckInnerProduct(int axis, bool transposed,
                                                    const TensorDescriptor& x,
                                                    const TensorDescriptor& w,
                                                    const TensorDescriptor& y, const char* where) {
  if (axis < 1 || axis >= x.rank()) {
    return Invalid(where, absl::StrCat("axis ", axis, " is not within [1, ", x.rank(), ")"));
  }
  InnerProductShape s;
  s.m = 1;
  s.k = 1;
  for (int i = 0; i < axis; ++i) s.m *= x.dims[i];
  for (int i = axis; i < x.rank(); ++i) s.k *= x.dims[i];
  if (w.rank() != 2 || w.dtype != x.dtype || w.dims[transposed ? 0 : 1] != s.k) {
    return Invalid(where, absl::StrCat("weights ", w.ToString(), " should be ",
                                       x.dtype == w.dtype ? "" : "of x's dtype and ",
                                       transposed ? "[K, Nout]" : "[Nout, K]", " with K = ", s.k));
  }
  s.n = w.dims[transposed ? 1 : 0];
  std::vector<int64_t> want(x.dims.begin(), x.dims.begin() + axis);
  want.push_back(s.n);
  if (y.dims != want || y.dtype != x.dtype) {
    return Invalid(where, absl::StrCat("y ", y.ToString(), " should have dims [",
                                       absl::StrJoin(want, ","), "] and x's dtype"));
  }
  return s;
}

}  // namespace dnn
}  // namespace kiln
