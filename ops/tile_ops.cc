// Tile (Caffe semantics): y repeats x `tiles` times along `axis`, each copy the whole block of
// x's dims from `axis` on: viewed as [outer, inner] (split at axis), y is [outer, tiles, inner]
// with y[o, t, i] = x[o, i]; y.dims[axis] = tiles x.dims[axis]. TileGradient(dy) sums dy's
// copies back: dx[o, i] = Σ_t dy[o, t, i].
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<int64_t> TilesOf(const InferContext& ctx) {
  const int64_t tiles = ctx.GetInt("tiles");
  if (tiles < 1) return absl::InvalidArgumentError(absl::StrCat("tiles is ", tiles, " (>= 1)"));
  return tiles;
}

absl::StatusOr<std::vector<TensorType>> InferTile(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  KILN_ASSIGN_OR_RETURN(int64_t tiles, TilesOf(ctx));
  std::vector<int64_t> out = x.dims();
  out[axis] *= tiles;
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, out));
  return std::vector<TensorType>{y};
}

absl::StatusOr<std::vector<TensorType>> InferTileGradient(const InferContext& ctx) {
  const TensorType& dy = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), dy.rank(), "axis"));
  KILN_ASSIGN_OR_RETURN(int64_t tiles, TilesOf(ctx));
  if (dy.dim(axis) % tiles != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dy ", DimsToString(dy.dims()), " axis ", axis,
                                                   " does not hold ", tiles, " tiles"));
  }
  std::vector<int64_t> out = dy.dims();
  out[axis] /= tiles;
  KILN_ASSIGN_OR_RETURN(TensorType dx, OutputLike(dy, out));
  return std::vector<TensorType>{dx};
}

std::vector<AttrDef> TileAttrs() {
  return {{"axis", AttrKind::kInt, AttrValue(int64_t{1})}, {"tiles", AttrKind::kInt, std::nullopt}};
}

}  // namespace

absl::Status RegisterTileOps(OpRegistry& registry) {
  OpDef tile = MakeOpDef("Tile", "tensor", TileAttrs(), InferTile,
                         "Repeats x `tiles` times along `axis` (Caffe Tile).");
  KILN_RETURN_IF_ERROR(registry.Register(std::move(tile)));
  OpDef grad = MakeOpDef("TileGradient", "tensor", TileAttrs(), InferTileGradient,
                         "Gradient of Tile: the copies of dy summed.");
  grad.input_names = {"dy"};
  grad.differentiable = false;
  return registry.Register(std::move(grad));
}

}  // namespace kiln
