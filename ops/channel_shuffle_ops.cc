// ChannelShuffle (ShuffleNet's channel shuffle, the ShuffleChannel layer of Caffe's forks,
// PyTorch's nn.ChannelShuffle): x [N, C, ...] with its C channels in `group` groups of C / group,
// y takes the first channel of every group, then the second of every group, and so on:
// y[n, j * group + i, ...] = x[n, i * (C / group) + j, ...]. The inverse is the same shuffle
// with C / group groups, which is therefore its gradient.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferChannelShuffle(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (x.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("x must be [N, C, ...], got ", DimsToString(x.dims())));
  }
  const int64_t group = ctx.GetInt("group");
  if (group < 1 || x.dim(1) % group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", group, " must be >= 1 and divide the ", x.dim(1), " channels"));
  }
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, x.dims()));
  return std::vector<TensorType>{y};
}

}  // namespace

absl::Status RegisterChannelShuffleOps(OpRegistry& registry) {
  OpDef shuffle = MakeOpDef(
      "ChannelShuffle", "tensor", {{"group", AttrKind::kInt, std::nullopt}}, InferChannelShuffle,
      "Interleaves the channels of `group` groups (ShuffleNet; Caffe forks' ShuffleChannel).");
  return registry.Register(std::move(shuffle));
}

}  // namespace kiln
