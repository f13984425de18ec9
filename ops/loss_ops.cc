// Losses and metrics with Caffe semantics. Each produces a scalar (rank 0) output.
//
// SoftmaxWithLoss(logits, labels): softmax over `axis`; the loss is -sum log p[label] over the
// outer*inner positions, divided by the normalizer: "valid" (positions whose label is not the
// ignore label), "full" (all positions), "batch_size" (outer), "none" (1); never below 1.
// labels hold outer*inner class indices (any float or i32 dtype, any shape of that count).
// Accuracy(scores, labels): fraction of positions whose label is among the top_k scores along
// `axis` (only strictly higher scores push the label out, as in Caffe), ignoring ignore_label
// positions. EuclideanLoss(a, b): sum((a-b)^2) / (2 * a.dims[0]). ignore_label is a list with zero
// or one entry: empty means no label is ignored.
// SigmoidCrossEntropyLoss(logits, targets): sum over elements of the numerically stable
// -(t*log(sigmoid(x)) + (1-t)*log(1-sigmoid(x))), ignoring elements whose target equals the ignore
// label, divided by the normalizer (Caffe's default for this layer is "batch_size", the size of
// dim 0). ContrastiveLoss(a, b, similar): per row i of the (N, D) features, d = ||a_i - b_i||;
// similar pairs add d^2, dissimilar ones max(margin - d, 0)^2 (or max(margin - d^2, 0) when
// legacy_version), and the sum is divided by 2N.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status CheckLabels(const InferContext& ctx, int axis) {
  const TensorType& x = ctx.input(0);
  const TensorType& labels = ctx.input(1);
  const int64_t positions =
      ProductOfDims(x.dims(), 0, axis) * ProductOfDims(x.dims(), axis + 1, x.rank());
  if (labels.num_elements() != positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels ", DimsToString(labels.dims()), " must hold ", positions, " entries (the dims of ",
        DimsToString(x.dims()), " other than axis ", axis, ")"));
  }
  if (labels.dtype() == DataType::kU8) return absl::InvalidArgumentError("labels may not be u8");
  if (ctx.GetInts("ignore_label").size() > 1) {
    return absl::InvalidArgumentError("ignore_label takes at most one value");
  }
  return absl::OkStatus();
}

absl::Status CheckNormalization(const InferContext& ctx) {
  const std::string& norm = ctx.GetString("normalization");
  if (norm != "valid" && norm != "full" && norm != "batch_size" && norm != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("normalization must be valid, full, batch_size or none, got \"", norm, "\""));
  }
  return absl::OkStatus();
}

TensorType Scalar(DataType dtype) { return *TensorType::Create(dtype, {}); }

absl::StatusOr<std::vector<TensorType>> InferSoftmaxWithLoss(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "logits"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  KILN_RETURN_IF_ERROR(CheckLabels(ctx, axis));
  KILN_RETURN_IF_ERROR(CheckNormalization(ctx));
  return std::vector<TensorType>{Scalar(x.dtype())};
}

absl::StatusOr<std::vector<TensorType>> InferAccuracy(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "scores"));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  KILN_RETURN_IF_ERROR(CheckLabels(ctx, axis));
  const int64_t k = ctx.GetInt("top_k");
  if (k < 1 || k > x.dim(axis)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k ", k, " must be in [1, ", x.dim(axis), "]"));
  }
  return std::vector<TensorType>{Scalar(x.dtype())};
}

absl::StatusOr<std::vector<TensorType>> InferEuclideanLoss(const InferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(a, "input 0"));
  KILN_RETURN_IF_ERROR(RequireFloat(b, "input 1"));
  if (a.rank() < 1 || a.dim(0) < 1) return absl::InvalidArgumentError("input 0 needs a batch dim");
  if (a.num_elements() != b.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs ", DimsToString(a.dims()), " and ",
                                                   DimsToString(b.dims()),
                                                   " differ in element count"));
  }
  return std::vector<TensorType>{Scalar(a.dtype())};
}

absl::StatusOr<std::vector<TensorType>> InferSigmoidCrossEntropyLoss(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& t = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "logits"));
  if (x.rank() < 1 || x.dim(0) < 1) return absl::InvalidArgumentError("logits need a batch dim");
  if (t.num_elements() != x.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("targets ", DimsToString(t.dims()),
                                                   " must have as many elements as logits ",
                                                   DimsToString(x.dims())));
  }
  if (ctx.GetInts("ignore_label").size() > 1) {
    return absl::InvalidArgumentError("ignore_label takes at most one value");
  }
  KILN_RETURN_IF_ERROR(CheckNormalization(ctx));
  return std::vector<TensorType>{Scalar(x.dtype())};
}

absl::StatusOr<std::vector<TensorType>> InferContrastiveLoss(const InferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  const TensorType& similar = ctx.input(2);
  KILN_RETURN_IF_ERROR(RequireFloat(a, "input a"));
  KILN_RETURN_IF_ERROR(RequireFloat(b, "input b"));
  if (a.rank() < 1 || a.dim(0) < 1) return absl::InvalidArgumentError("input a needs a batch dim");
  if (a.dims() != b.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs a ", DimsToString(a.dims()), " and b ",
                                                   DimsToString(b.dims()), " differ in shape"));
  }
  if (similar.num_elements() != a.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("similarity ", DimsToString(similar.dims()),
                                                   " must hold one entry per row (", a.dim(0),
                                                   ")"));
  }
  return std::vector<TensorType>{Scalar(a.dtype())};
}

}  // namespace

absl::Status RegisterLossOps(OpRegistry& registry) {
  OpDef swl;
  swl.name = "SoftmaxWithLoss";
  swl.family = "loss";
  swl.input_names = {"logits", "labels"};
  swl.min_inputs = swl.max_inputs = 2;
  swl.attrs = {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
               {"ignore_label", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
               {"normalization", AttrKind::kString, AttrValue(std::string("valid"))}};
  swl.infer_types = InferSoftmaxWithLoss;
  swl.differentiable = true;
  swl.summary = "Softmax + multinomial logistic loss (Caffe normalization modes).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(swl)));

  OpDef acc;
  acc.name = "Accuracy";
  acc.family = "loss";
  acc.input_names = {"scores", "labels"};
  acc.min_inputs = acc.max_inputs = 2;
  acc.attrs = {{"top_k", AttrKind::kInt, AttrValue(int64_t{1})},
               {"axis", AttrKind::kInt, AttrValue(int64_t{1})},
               {"ignore_label", AttrKind::kInts, AttrValue(std::vector<int64_t>{})}};
  acc.infer_types = InferAccuracy;
  acc.summary = "Top-k classification accuracy.";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(acc)));

  OpDef euc;
  euc.name = "EuclideanLoss";
  euc.family = "loss";
  euc.input_names = {"a", "b"};
  euc.min_inputs = euc.max_inputs = 2;
  euc.infer_types = InferEuclideanLoss;
  euc.differentiable = true;
  euc.summary = "sum((a-b)^2) / (2N).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(euc)));

  OpDef sce;
  sce.name = "SigmoidCrossEntropyLoss";
  sce.family = "loss";
  sce.input_names = {"logits", "targets"};
  sce.min_inputs = sce.max_inputs = 2;
  sce.attrs = {{"ignore_label", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
               {"normalization", AttrKind::kString, AttrValue(std::string("batch_size"))}};
  sce.infer_types = InferSigmoidCrossEntropyLoss;
  sce.differentiable = true;
  sce.summary = "Element-wise sigmoid + cross-entropy against targets in [0, 1].";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(sce)));

  OpDef con;
  con.name = "ContrastiveLoss";
  con.family = "loss";
  con.input_names = {"a", "b", "similar"};
  con.min_inputs = con.max_inputs = 3;
  con.attrs = {{"margin", AttrKind::kFloat, AttrValue(1.0)},
               {"legacy_version", AttrKind::kBool, AttrValue(false)}};
  con.infer_types = InferContrastiveLoss;
  con.differentiable = true;
  con.summary = "Siamese contrastive loss (Hadsell et al. 2006) over paired rows.";
  return registry.Register(std::move(con));
}

}  // namespace kiln
