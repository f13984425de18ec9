// Reference Tile and TileGradient (ops/tile_ops.cc): [outer, inner] blocks copied `tiles` times,
// and the copies summed back (double accumulation, in tile order).
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

struct TileShape {
  int64_t outer, tiles, inner;  // inner: x's elements from axis on
};

absl::StatusOr<TileShape> ShapeOf(const Node& node, const std::vector<int64_t>& x) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.size(), "axis"));
  return TileShape{ProductOfDims(x, 0, axis), node.GetInt("tiles"),
                   ProductOfDims(x, axis, x.size())};
}

absl::Status Tile(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(TileShape s, ShapeOf(node, a.in_types[0].dims()));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t t = 0; t < s.tiles; ++t) {
      for (int64_t i = 0; i < s.inner; ++i) {
        a.out[0][(o * s.tiles + t) * s.inner + i] = a.in[0][o * s.inner + i];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TileGradient(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(TileShape s, ShapeOf(node, a.out_types[0].dims()));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      double sum = 0;
      for (int64_t t = 0; t < s.tiles; ++t) sum += a.in[0][(o * s.tiles + t) * s.inner + i];
      a.out[0][o * s.inner + i] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceTile(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Tile", Tile));
  return RegisterReference(registry, "TileGradient", TileGradient);
}

}  // namespace kiln
