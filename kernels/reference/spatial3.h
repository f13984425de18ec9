// Reference kernels handle 1, 2 and 3 spatial dims with one loop nest by promoting every shape
// to 3 spatial dims, leading dims of size 1 (stride 1, pad 0, dilation 1) filling the gap.
#ifndef KILN_KERNELS_REFERENCE_SPATIAL3_H_
#define KILN_KERNELS_REFERENCE_SPATIAL3_H_

#include <array>
#include <cstdint>
#include <vector>

namespace kiln {

using Dims3 = std::array<int64_t, 3>;

// The last `values.size()` entries of the result are `values`; the rest are `fill`.
inline Dims3 Promote3(const std::vector<int64_t>& values, int64_t fill) {
  Dims3 out = {fill, fill, fill};
  const int offset = 3 - static_cast<int>(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[offset + i] = values[i];
  return out;
}

// Spatial dims (from dim 2 on) of an N,C,spatial... shape, promoted.
inline Dims3 SpatialOf(const std::vector<int64_t>& dims) {
  return Promote3(std::vector<int64_t>(dims.begin() + 2, dims.end()), 1);
}

inline int64_t Volume(const Dims3& d) { return d[0] * d[1] * d[2]; }

}  // namespace kiln

#endif  // KILN_KERNELS_REFERENCE_SPATIAL3_H_
