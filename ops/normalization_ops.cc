// LRN (Caffe semantics, across channels or within a channel) and BatchNorm.
//
// LRN across channels: y = x * (k + alpha/n * sum_{window over C} x^2)^-beta, the window of n
// channels centred on c, out-of-range channels counting as 0.
// LRN within channel: y = x * (1 + alpha * avg_{n x n window, zero-padded} x^2)^-beta, where the
// average divides by n*n (Caffe pools x^2 with AVE, pad (n-1)/2, stride 1); k is not used.
//
// BatchNorm(x, mean, variance, scale_factor?) normalizes y = (x - mean) / sqrt(var + eps).
// With use_global_stats the stored statistics are used; with the optional 1-element
// scale_factor input they are Caffe's accumulated sums and are divided by it (0 when it is 0).
// Without use_global_stats the batch statistics (biased variance) are used and the statistic
// inputs are ignored by the forward pass, and with update_running_stats three more outputs hold
// them after this batch, as Caffe's training forward leaves its blobs: mean and variance times
// moving_average_fraction plus the batch's mean and unbiased variance, the factor times the
// fraction plus 1. mode "spatial" has per-channel statistics [C];
// "per_activation" has one per (C, spatial...) element, shaped like x without N.
//
// AffineBatchNorm(x, mean, variance, scale_factor, scale, bias) is a training-mode spatial
// BatchNorm followed by Caffe's per-channel Scale with bias: y = scale (x - mean_B) / sqrt(var_B +
// eps) + bias with the batch's statistics, updating the running ones as BatchNorm does. Training
// graphs fuse the Caffe pair into it (passes/fuse_batchnorm_scale.cc), so one primitive pass
// normalizes and scales, and one backward pass gives dx, dscale and dbias. Its last two outputs
// are the batch's mean and inverse standard deviation 1 / sqrt(var_B + eps) (f32 [C], cuDNN's
// saved mean and inverse variance): the gradient reads them instead of summing x again. With
// "relu" the output is max(0, y): the ReLU Caffe nets put after the pair, fused by
// passes/fuse_affine_batchnorm_relu.cc so neither direction runs it as a pass of its own.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferLrn(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  const std::string& region = ctx.GetString("region");
  const int64_t n = ctx.GetInt("local_size");
  if (n < 1 || n % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("local_size must be odd and >= 1, got ", n));
  }
  if (region == "across_channels") {
    if (x.rank() < 2) return absl::InvalidArgumentError("input needs at least N and C dims");
  } else if (region == "within_channel") {
    if (x.rank() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "within_channel LRN needs a 4-d N,C,H,W input, got ", DimsToString(x.dims())));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "region must be \"across_channels\" or \"within_channel\", got \"", region, "\""));
  }
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, x.dims()));
  return std::vector<TensorType>{result};
}

absl::StatusOr<std::vector<TensorType>> InferBatchNorm(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (x.rank() < 2) return absl::InvalidArgumentError("input needs at least N and C dims");
  const std::string& mode = ctx.GetString("mode");
  std::vector<int64_t> stat_dims;
  if (mode == "spatial") {
    stat_dims = {x.dim(1)};
  } else if (mode == "per_activation") {
    stat_dims.assign(x.dims().begin() + 1, x.dims().end());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("mode must be \"spatial\" or \"per_activation\", got \"", mode, "\""));
  }
  if (ctx.GetFloat("eps") <= 0) return absl::InvalidArgumentError("eps must be > 0");
  KILN_RETURN_IF_ERROR(RequireDims(ctx.input(1), stat_dims, "mean"));
  KILN_RETURN_IF_ERROR(RequireDims(ctx.input(2), stat_dims, "variance"));
  if (ctx.num_inputs() == 4) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(3), {1}, "scale_factor"));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(i), "statistics"));
  }
  if (!ctx.GetBool("use_global_stats")) {
    const int64_t m =
        mode == "spatial" ? x.num_elements() / std::max<int64_t>(x.dim(1), 1) : x.dim(0);
    if (m < 1) return absl::InvalidArgumentError("batch statistics need at least one element");
  }
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, x.dims()));
  std::vector<TensorType> out = {y};
  if (ctx.GetBool("update_running_stats")) {
    // Training: the running statistics after this batch, as Caffe updates its three blobs.
    if (ctx.GetBool("use_global_stats") || ctx.num_inputs() != 4) {
      return absl::InvalidArgumentError(
          "update_running_stats needs batch statistics (use_global_stats false) and the "
          "scale_factor input");
    }
    for (int i = 1; i < 4; ++i) out.push_back(ctx.input(i).Contiguous());
  }
  return out;
}

// AffineBatchNorm(x, mean, variance, scale_factor, scale, bias): the training-mode BatchNorm
// and the per-channel Scale (with bias) Caffe puts after it, as one op: y = scale[c] x̂ + bias[c]
// with x̂ normalized by the batch statistics. Same running-statistic outputs as BatchNorm (at the
// same indices), then the saved batch mean and inverse standard deviation, always f32 whatever
// x's dtype: they are what the primitive computes and what its backward reads.
absl::StatusOr<std::vector<TensorType>> InferAffineBatchNorm(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (x.rank() < 2) return absl::InvalidArgumentError("input needs at least N and C dims");
  if (ctx.GetFloat("eps") <= 0) return absl::InvalidArgumentError("eps must be > 0");
  const std::vector<int64_t> channels = {x.dim(1)};
  const char* names[] = {"", "mean", "variance", "scale_factor", "scale", "bias"};
  for (int i = 1; i < 6; ++i) {
    KILN_RETURN_IF_ERROR(
        RequireDims(ctx.input(i), i == 3 ? std::vector<int64_t>{1} : channels, names[i]));
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(i), names[i]));
  }
  if (x.num_elements() / std::max<int64_t>(x.dim(1), 1) < 1) {
    return absl::InvalidArgumentError("batch statistics need at least one element");
  }
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, x.dims()));
  std::vector<TensorType> out = {y};
  if (ctx.GetBool("update_running_stats")) {
    for (int i = 1; i < 4; ++i) out.push_back(ctx.input(i).Contiguous());
  }
  KILN_ASSIGN_OR_RETURN(TensorType saved, TensorType::Create(DataType::kF32, channels));
  out.push_back(saved);  // saved_mean
  out.push_back(saved);  // saved_inv_std
  return out;
}

}  // namespace

absl::Status RegisterNormalizationOps(OpRegistry& registry) {
  OpDef lrn;
  lrn.name = "LRN";
  lrn.family = "normalization";
  lrn.input_names = {"x"};
  lrn.attrs = {{"region", AttrKind::kString, AttrValue(std::string("across_channels"))},
               {"local_size", AttrKind::kInt, AttrValue(int64_t{5})},
               {"alpha", AttrKind::kFloat, AttrValue(1.0)},
               {"beta", AttrKind::kFloat, AttrValue(0.75)},
               {"k", AttrKind::kFloat, AttrValue(1.0)}};
  lrn.infer_types = InferLrn;
  lrn.differentiable = true;
  lrn.summary = "Local response normalization, Caffe semantics (alpha divided by the window).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(lrn)));

  OpDef bn;
  bn.name = "BatchNorm";
  bn.family = "normalization";
  bn.input_names = {"x", "mean", "variance", "scale_factor"};
  bn.min_inputs = 3;
  bn.max_inputs = 4;
  bn.attrs = {{"eps", AttrKind::kFloat, AttrValue(1e-5)},
              {"mode", AttrKind::kString, AttrValue(std::string("spatial"))},
              {"use_global_stats", AttrKind::kBool, AttrValue(true)},
              {"moving_average_fraction", AttrKind::kFloat, AttrValue(0.999)},
              {"update_running_stats", AttrKind::kBool, AttrValue(false)}};
  bn.infer_types = InferBatchNorm;
  bn.differentiable = true;
  bn.weight_inputs = {1, 2, 3};
  bn.summary = "Batch normalization (stored or batch statistics; Caffe's 3-blob form).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(bn)));

  OpDef affine;
  affine.name = "AffineBatchNorm";
  affine.family = "normalization";
  affine.input_names = {"x", "mean", "variance", "scale_factor", "scale", "bias"};
  affine.min_inputs = 6;
  affine.max_inputs = 6;
  affine.attrs = {{"eps", AttrKind::kFloat, AttrValue(1e-5)},
                  {"moving_average_fraction", AttrKind::kFloat, AttrValue(0.999)},
                  {"update_running_stats", AttrKind::kBool, AttrValue(false)},
                  {"relu", AttrKind::kBool, AttrValue(false)}};
  affine.infer_types = InferAffineBatchNorm;
  affine.differentiable = true;
  affine.weight_inputs = {1, 2, 3, 4, 5};
  affine.summary =
      "Training-mode BatchNorm (batch statistics, per channel) and the Scale with bias after "
      "it as one op, like an affine BatchNorm2d; optionally the ReLU after them too.";
  return registry.Register(std::move(affine));
}

}  // namespace kiln
