// ArgMax's geometry (Caffe semantics, ops/argmax_ops.cc), shared by its shape rule and its
// kernels so that all three read a node the same way.
//
// x is seen as [outer, dim, inner] rows: with an axis, dim = x.dims[axis] and the rows run along
// it; without one (Caffe's default), each of the dims[0] items is one row over all its other
// elements (dim = the product of dims[1:], inner = 1). Each row gives its top_k entries, best
// first, written to the output at
//   with an axis:     (o top_k + k) inner + i        (the index, or the value with out_max_val)
//   without:          o top_k + k                    (the index), or with out_max_val
//                     o 2 top_k + k (index) and o 2 top_k + top_k + k (value)
// so the output is x.dims with dims[axis] = top_k, or [dims[0], 1 or 2, top_k, 1, ...] padded
// with ones to x's rank (at least 3), exactly Caffe's top shape.
#ifndef KILN_OPS_ARGMAX_PARAMS_H_
#define KILN_OPS_ARGMAX_PARAMS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ir/tensor_type.h"
#include "ops/shape_util.h"

namespace kiln {

struct ArgMaxGeometry {
  bool has_axis = false;
  int axis = -1;  // normalized; -1 without an axis
  int64_t outer = 0, dim = 0, inner = 1;
  int64_t top_k = 1;
  bool out_max_val = false;
  std::vector<int64_t> out_dims;
};

// The geometry of an ArgMax over x.dims with the node's attributes: `axis` holds zero or one
// entry (empty: Caffe's flattened form). InvalidArgument naming the attribute when they do not
// fit x (top_k outside [1, dim], a bad axis, a rank-0 x).
inline absl::StatusOr<ArgMaxGeometry> ArgMaxGeometryOf(const std::vector<int64_t>& x_dims,
                                                       int64_t top_k,
                                                       const std::vector<int64_t>& axis,
                                                       bool out_max_val) {
  const int rank = static_cast<int>(x_dims.size());
  if (rank < 1) return absl::InvalidArgumentError("x must have at least one axis (the items)");
  if (axis.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis takes at most one value, got ", DimsToString(axis)));
  }
  ArgMaxGeometry g;
  g.has_axis = !axis.empty();
  g.top_k = top_k;
  g.out_max_val = out_max_val;
  if (g.has_axis) {
    absl::StatusOr<int> a = NormalizeAxis(axis[0], rank, "axis");
    if (!a.ok()) return a.status();
    g.axis = *a;
    g.outer = ProductOfDims(x_dims, 0, g.axis);
    g.dim = x_dims[g.axis];
    g.inner = ProductOfDims(x_dims, g.axis + 1, rank);
    g.out_dims = x_dims;
    g.out_dims[g.axis] = top_k;
  } else {
    g.outer = x_dims[0];
    g.dim = ProductOfDims(x_dims, 1, rank);
    g.out_dims.assign(std::max(rank, 3), 1);
    g.out_dims[0] = x_dims[0];
    g.out_dims[1] = out_max_val ? 2 : 1;
    g.out_dims[2] = top_k;
  }
  if (top_k < 1 || top_k > g.dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_k ", top_k, " must be in [1, ", g.dim, "] (the size of ",
        g.has_axis ? absl::StrCat("axis ", g.axis) : std::string("each item's elements"), ")"));
  }
  return g;
}

// Where entry k of row (o, i) goes in the output (its index; its value with `value`, only
// without an axis and with out_max_val).
inline int64_t ArgMaxOutputOffset(const ArgMaxGeometry& g, int64_t o, int64_t i, int64_t k,
                                  bool value) {
  if (g.has_axis) return (o * g.top_k + k) * g.inner + i;
  if (!g.out_max_val) return o * g.top_k + k;
  return o * 2 * g.top_k + (value ? g.top_k : 0) + k;
}

}  // namespace kiln

#endif  // KILN_OPS_ARGMAX_PARAMS_H_
