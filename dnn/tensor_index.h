// Host helpers of the CPU reference: walking every multi-index of a tensor in row-major order,
// and turning a multi-index into an element offset through the descriptor's strides.
#ifndef KILN_DNN_TENSOR_INDEX_H_
#define KILN_DNN_TENSOR_INDEX_H_

#include <cstdint>
#include <vector>

namespace kiln {
namespace dnn {

// Calls f(index) for every index of `dims`, the last dim fastest.
template <class F>
void ForEachIndex(const std::vector<int64_t>& dims, F&& f) {
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t d : dims) {
    if (d <= 0) return;
  }
  while (true) {
    f(index);
    int i = static_cast<int>(dims.size()) - 1;
    for (; i >= 0; --i) {
      if (++index[i] < dims[i]) break;
      index[i] = 0;
    }
    if (i < 0) return;
  }
}

inline int64_t OffsetOf(const std::vector<int64_t>& strides, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i) offset += index[i] * strides[i];
  return offset;
}

// out = alpha v + beta out, without reading out when beta == 0 (it may hold NaN poison).
inline void Blend(double alpha, double v, double beta, double* out) {
  *out = beta == 0 ? alpha * v : alpha * v + beta * *out;
}

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_TENSOR_INDEX_H_
