// A convolution direction seen as a matrix product per group, C[m, n] = sum_k A[m, k] B[n, k],
// where every operand element is gathered from a strided tensor. Plain structs and inline
// functions only, so the same code runs in CUDA kernels and in the CPU tests that check the
// views against the reference (tests/kernels/gemm_view_test.cc).
//
// An index (a row m, a column n or a reduction index k) is decoded into up to four digits, and
// each digit adds to an element offset and to up to three spatial coordinates (d, h, w). An
// operand element is at `row.offset + col.offset + sum coord * coord_stride`, and exists only
// when every coordinate lies inside the tensor (padding reads as zero). Backward data with
// stride > 1 also needs each coordinate to divide by the stride (the "holes" of the upsampled
// gradient read as zero).
#ifndef KILN_DNN_GEMM_VIEW_H_
#define KILN_DNN_GEMM_VIEW_H_

#include <cstdint>

#include "dnn/host_device.h"

namespace kiln {
namespace dnn {

struct IndexMap {
  int64_t size[4] = {1, 1, 1, 1};  // digit 3 varies fastest
  int64_t stride[4] = {0, 0, 0, 0};
  int32_t coord[4][3] = {};
  int64_t base = 0;
  int32_t coord_base[3] = {0, 0, 0};

  KILN_HD int64_t Count() const { return size[0] * size[1] * size[2] * size[3]; }
};

struct IndexInfo {
  int64_t offset;
  int32_t coord[3];
};

KILN_HD IndexInfo Decode(const IndexMap& map, int64_t index) {
  IndexInfo info{map.base, {map.coord_base[0], map.coord_base[1], map.coord_base[2]}};
  KILN_UNROLL
  for (int digit = 3; digit >= 0; --digit) {
    const int64_t size = map.size[digit];
    const int64_t q = size == 1 ? index : index / size;
    const int32_t v = static_cast<int32_t>(index - q * size);
    index = q;
    info.offset += v * map.stride[digit];
    KILN_UNROLL
    for (int j = 0; j < 3; ++j) info.coord[j] += v * map.coord[digit][j];
  }
  return info;
}

// One GEMM operand: `outer` indexes m (for A) or n (for B), `inner` indexes k.
struct GatherOperand {
  IndexMap outer, inner;
  bool spatial = false;  // false: no coordinates, every element exists
  bool divide = false;   // coordinates must be multiples of `divisor`, then are divided by it
  int32_t extent[3] = {1, 1, 1};
  int32_t divisor[3] = {1, 1, 1};
  int64_t coord_stride[3] = {0, 0, 0};
  int64_t group_stride = 0;  // elements between consecutive groups' operands
};

// The element offset of operand(row, col), or false when it lies in padding.
KILN_HD bool Locate(const GatherOperand& op, const IndexInfo& row, const IndexInfo& col,
                    int64_t* offset) {
  int64_t off = row.offset + col.offset;
  if (op.spatial) {
    KILN_UNROLL
    for (int j = 0; j < 3; ++j) {
      int32_t c = row.coord[j] + col.coord[j];
      if (op.divide) {
        if (c < 0 || c % op.divisor[j] != 0) return false;
        c /= op.divisor[j];
      }
      if (c < 0 || c >= op.extent[j]) return false;
      off += c * op.coord_stride[j];
    }
  }
  *offset = off;
  return true;
}

// Where C[m, n] goes: rows.offset(m) + cols.offset(n) + group * group_stride.
struct OutputMap {
  IndexMap rows, cols;
  int64_t group_stride = 0;
};

// A direction of a convolution as `groups` independent GEMMs of m x n x k.
struct GemmView {
  GatherOperand a, b;
  OutputMap c;
  int64_t m = 0, n = 0, k = 0, groups = 1;
};

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_GEMM_VIEW_H_
