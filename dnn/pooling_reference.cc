// The CPU oracle of pooling, 2-d and 3-d, forward and backward.
#include <limits>

#include "base/status_macros.h"
#include "dnn/pooling_math.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "dnn/tensor_index.h"

namespace kiln {
namespace dnn {
namespace reference {

namespace {

// The three pooling axes (D, H, W) of a call; 2-d pooling has a unit D axis.
struct PoolAxes {
  PoolAxis axis[3];
  int spatial_rank;
};

PoolAxes AxesOf(const PoolingDescriptor& pool, const Desc& xd, const Desc& yd) {
  const PoolingDescriptor p = pool.ResolvedFor(xd);
  PoolAxes a;
  a.spatial_rank = p.spatial_rank();
  const int off = 3 - a.spatial_rank;
  for (int i = 0; i < a.spatial_rank; ++i) {
    a.axis[off + i] = {xd.dims[2 + i], yd.dims[2 + i], p.window[i], p.strides[i], p.pads[i]};
  }
  return a;
}

// Calls visit(offset in x) for each input of the window of output `out_index` (N, C, spatial)
// in (d, h, w) order, and returns the divisor an average over that window uses.
template <class F>
int64_t ForEachInWindow(const PoolingDescriptor& pool, const PoolAxes& a, const Desc& xd,
                        const std::vector<int64_t>& out_index, F visit) {
  const int off = 3 - a.spatial_rank;
  int64_t begin[3] = {0, 0, 0}, end[3] = {1, 1, 1}, padded[3] = {1, 1, 1};
  for (int i = 0; i < a.spatial_rank; ++i) {
    PoolWindow(a.axis[off + i], out_index[2 + i], &begin[off + i], &end[off + i], &padded[off + i]);
  }
  std::vector<int64_t> in_index = out_index;
  int64_t covered = 0;
  for (int64_t d = begin[0]; d < end[0]; ++d) {
    for (int64_t h = begin[1]; h < end[1]; ++h) {
      for (int64_t w = begin[2]; w < end[2]; ++w) {
        const int64_t pos[3] = {d, h, w};
        for (int i = 0; i < a.spatial_rank; ++i) in_index[2 + i] = pos[off + i];
        visit(OffsetOf(xd.strides, in_index));
        ++covered;
      }
    }
  }
  if (pool.mode == PoolingMode::kAverageExcludePadding) return covered;
  return padded[0] * padded[1] * padded[2];
}

}  // namespace

absl::Status PoolingForward(const PoolingDescriptor& pool, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckPooling(pool, xd, yd, "PoolingForward"));
  const PoolAxes a = AxesOf(pool, xd, yd);
  ForEachIndex(yd.dims, [&](const std::vector<int64_t>& o) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    const int64_t divisor = ForEachInWindow(pool, a, xd, o, [&](int64_t off) {
      if (x[off] > best) best = x[off];
      sum += x[off];
    });
    const double v = pool.mode == PoolingMode::kMax ? best : sum / static_cast<double>(divisor);
    Blend(alpha, v, beta, y + OffsetOf(yd.strides, o));
  });
  return absl::OkStatus();
}

absl::Status PoolingBackward(const PoolingDescriptor& pool, double alpha, const Desc& yd,
                             const double* y, const Desc& dyd, const double* dy, const Desc& xd,
                             const double* x, double beta, const Desc& dxd, double* dx) {
  const char* where = "PoolingBackward";
  KILN_RETURN_IF_ERROR(CheckPooling(pool, xd, yd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  (void)y;
  const PoolAxes a = AxesOf(pool, xd, yd);
  // Accumulate into a dense copy indexed like x, then blend into dx.
  std::vector<double> grad(xd.ElementSpan(), 0.0);
  ForEachIndex(yd.dims, [&](const std::vector<int64_t>& o) {
    const double g = dy[OffsetOf(dyd.strides, o)];
    if (pool.mode == PoolingMode::kMax) {
      int64_t arg = -1;
      double best = -std::numeric_limits<double>::infinity();
      ForEachInWindow(pool, a, xd, o, [&](int64_t off) {
        if (arg < 0 || x[off] > best) best = x[off], arg = off;
      });
      grad[arg] += g;
      return;
    }
    std::vector<int64_t> offsets;
    const int64_t divisor =
        ForEachInWindow(pool, a, xd, o, [&](int64_t off) { offsets.push_back(off); });
    for (int64_t off : offsets) grad[off] += g / static_cast<double>(divisor);
  });
  ForEachIndex(xd.dims, [&](const std::vector<int64_t>& i) {
    Blend(alpha, grad[OffsetOf(xd.strides, i)], beta, dx + OffsetOf(dxd.strides, i));
  });
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
