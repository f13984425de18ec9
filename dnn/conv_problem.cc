#include "dnn/conv_problem.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln {
namespace dnn {

double ConvProblem::Flops() const {
  return 2.0 * static_cast<double>(OutputPixels()) * static_cast<double>(k) *
         static_cast<double>(cg()) * static_cast<double>(FilterTaps());
}

std::string ConvProblem::Key() const {
  auto join3 = [](const int64_t* v) { return absl::StrCat(v[0], "x", v[1], "x", v[2]); };
  return absl::StrCat(DataTypeName(dtype), math == MathMode::kTf32 ? "/tf32" : "/fp32", "/n", n,
                      "c", c, "k", k, "g", groups, "/in", join3(in), "/f", join3(filter), "/p",
                      join3(pad), "/s", join3(stride), "/d", join3(dilation),
                      mode == ConvolutionMode::kConvolution ? "/conv" : "/xcorr", "/x",
                      absl::StrJoin(x_stride, ","), "/y", absl::StrJoin(y_stride, ","),
                      filter_format == TensorFormat::kNCHW ? "/kcrs" : "/krsc");
}

absl::StatusOr<ConvProblem> MakeConvProblem(const TensorDescriptor& x, const FilterDescriptor& w,
                                            const ConvolutionDescriptor& conv,
                                            const TensorDescriptor& y, const char* where) {
  auto annotate = [where](const absl::Status& s) { return Annotate(s, where); };
  absl::StatusOr<std::vector<int64_t>> out = ConvolutionOutputDims(x, w, conv);
  if (!out.ok()) return annotate(out.status());
  if (x.dtype != w.dtype || x.dtype != y.dtype) {
    return annotate(absl::InvalidArgumentError(
        absl::StrCat("dtypes differ: x ", DataTypeName(x.dtype), ", filter ", DataTypeName(w.dtype),
                     ", y ", DataTypeName(y.dtype))));
  }
  if (y.dims != *out) {
    return annotate(absl::InvalidArgumentError(
        absl::StrCat("y has dims [", absl::StrJoin(y.dims, ","), "] but the convolution gives [",
                     absl::StrJoin(*out, ","), "]")));
  }
  ConvProblem p;
  p.dtype = x.dtype;
  p.math = conv.math;
  p.mode = conv.mode;
  p.spatial_rank = conv.spatial_rank();
  p.n = x.dims[0];
  p.c = x.dims[1];
  p.k = w.dims[0];
  p.groups = conv.groups;
  p.filter_format = w.format;
  const std::vector<int64_t> ws = w.Strides();
  const int off = 3 - p.spatial_rank;  // 2-d problems fill D/T/O with 1
  p.x_stride[0] = x.strides[0];
  p.x_stride[1] = x.strides[1];
  p.y_stride[0] = y.strides[0];
  p.y_stride[1] = y.strides[1];
  p.w_stride[0] = ws[0];
  p.w_stride[1] = ws[1];
  for (int i = 0; i < 3; ++i) {
    const int j = i - off;  // index into the descriptor's spatial dims, or < 0
    if (j < 0) {
      // A depth of 1: any stride works; 0 keeps the key independent of it.
      p.x_stride[2 + i] = p.y_stride[2 + i] = p.w_stride[2 + i] = 0;
      continue;
    }
    p.in[i] = x.dims[2 + j];
    p.out[i] = y.dims[2 + j];
    p.filter[i] = w.dims[2 + j];
    p.pad[i] = conv.pads[j];
    p.stride[i] = conv.strides[j];
    p.dilation[i] = conv.dilations[j];
    p.x_stride[2 + i] = x.strides[2 + j];
    p.y_stride[2 + i] = y.strides[2 + j];
    p.w_stride[2 + i] = ws[2 + j];
  }
  p.x_span = x.ElementSpan();
  p.y_span = y.ElementSpan();
  p.w_count = w.ElementCount();
  return p;
}

bool ConvProblem::PaddingIsSymmetric() const {
  for (int i = 0; i < 3; ++i) {
    const int64_t extent = dilation[i] * (filter[i] - 1) + 1;
    if (out[i] != (in[i] + 2 * pad[i] - extent) / stride[i] + 1) return false;
  }
  return true;
}

ConvProblem OneGroupOf(const ConvProblem& p) {
  ConvProblem q = p;
  q.groups = 1;
  q.c = p.cg();
  q.k = p.kg();
  // The spans of one group's slice, from its own start.
  const int64_t x_dims[5] = {q.n, q.c, q.in[0], q.in[1], q.in[2]};
  const int64_t y_dims[5] = {q.n, q.k, q.out[0], q.out[1], q.out[2]};
  q.x_span = q.y_span = 1;
  for (int i = 0; i < 5; ++i) {
    q.x_span += (x_dims[i] - 1) * p.x_stride[i];
    q.y_span += (y_dims[i] - 1) * p.y_stride[i];
  }
  q.w_count = q.k * q.c * q.FilterTaps();
  return q;
}

GroupOffsets GroupOffsetsOf(const ConvProblem& p, int64_t g) {
  GroupOffsets o;
  o.x = g * p.cg() * p.x_stride[1];
  o.y = g * p.kg() * p.y_stride[1];
  o.w = g * p.kg() * p.w_stride[0];
  return o;
}

absl::Status CheckBiasDescriptor(const TensorDescriptor& db, const TensorDescriptor& dy,
                                 const char* where) {
  bool ok =
      dy.rank() >= 3 && db.rank() == dy.rank() && db.dtype == dy.dtype && db.dims[1] == dy.dims[1];
  for (int i = 0; ok && i < db.rank(); ++i) ok = i == 1 || db.dims[i] == 1;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": bias gradient ", db.ToString(),
                                                 " does not match dy ", dy.ToString(),
                                                 " (want dims 1, C, 1, ... and the same dtype)"));
}

}  // namespace dnn
}  // namespace kiln
