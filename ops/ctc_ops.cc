// CTC loss (connectionist temporal classification; Graves et al. 2006) with PyTorch's
// nn.CTCLoss definitions, over the CTC primitive (dnn/ctc/ctc_loss.h).
//
//   CTCLoss(activations [T, N, C], labels [N, L], input_lengths [N], label_lengths [N]) -> loss []
//   CTCLossGradient(the same four inputs) -> dactivations [T, N, C]
//
// activations are unnormalised scores: the op applies log_softmax over C itself (cuDNN's CTC,
// warp-ctc), so no Softmax layer goes in front. labels are padded: row n's first
// label_lengths[n] entries are its target, the rest is ignored. The three index inputs are
// integers stored as numbers (kept f32 by the precision pass, as other labels are).
//   reduction "mean" (PyTorch's default): (1/N) Σ_n loss_n / max(label_lengths[n], 1).
//   reduction "sum": Σ_n loss_n.
// PyTorch's "none" (one loss per sample) is not offered: a loss op's output is the scalar the
// training engine differentiates.
// An alignment that cannot fit (label_lengths[n] plus its repeats longer than input_lengths[n])
// has an infinite loss and NaN gradient, or 0 for both with zero_infinity, as in PyTorch; that
// is data, not an error. Values that are not integers in range (a label outside [0, C) or equal
// to blank, a length outside [0, T] or [0, L]) are errors the kernels report: the reference as
// InvalidArgument naming the node and the element, CUDA as a NaN loss and NaN gradient rows for
// that sample (a device cannot stop mid-plan).
// CTCLossGradient recomputes the forward: alpha-beta is the gradient's own cost anyway, and the
// forward keeps nothing a backward could reuse without a reserve buffer ops cannot size.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// The checks both ops share: ranks, matching N, the blank inside [0, C), a known reduction.
absl::Status CheckCtcInputs(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "activations"));
  if (x.rank() != 3 || x.dim(0) < 1 || x.dim(1) < 1 || x.dim(2) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "activations must be [T, N, C] with every dim >= 1, got ", DimsToString(x.dims())));
  }
  const int64_t n = x.dim(1);
  const TensorType& labels = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(labels, "labels"));
  if (labels.rank() != 2 || labels.dim(0) != n || labels.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels must be [N, L] with N = ", n, " and L >= 1, got ", DimsToString(labels.dims())));
  }
  const char* names[] = {"input_lengths", "label_lengths"};
  for (int i = 0; i < 2; ++i) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(2 + i), names[i]));
    KILN_RETURN_IF_ERROR(RequireDims(ctx.input(2 + i), {n}, names[i]));
  }
  const int64_t blank = ctx.GetInt("blank");
  if (blank < 0 || blank >= x.dim(2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("blank ", blank, " is outside [0, ", x.dim(2), ") (C)"));
  }
  const std::string& reduction = ctx.GetString("reduction");
  if (reduction != "mean" && reduction != "sum") {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduction must be mean or sum (the loss is one scalar), got \"", reduction, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferCtcLoss(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckCtcInputs(ctx));
  KILN_ASSIGN_OR_RETURN(TensorType loss, TensorType::Create(ctx.input(0).dtype(), {}));
  return std::vector<TensorType>{loss};
}

absl::StatusOr<std::vector<TensorType>> InferCtcLossGradient(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckCtcInputs(ctx));
  KILN_ASSIGN_OR_RETURN(TensorType dx, OutputLike(ctx.input(0), ctx.input(0).dims()));
  return std::vector<TensorType>{dx};
}

std::vector<AttrDef> CtcAttrs() {
  return {{"blank", AttrKind::kInt, AttrValue(int64_t{0})},
          {"reduction", AttrKind::kString, AttrValue(std::string("mean"))},
          {"zero_infinity", AttrKind::kBool, AttrValue(false)}};
}

}  // namespace

absl::Status RegisterCtcOps(OpRegistry& registry) {
  OpDef ctc;
  ctc.name = "CTCLoss";
  ctc.family = "ctc";
  ctc.input_names = {"activations", "labels", "input_lengths", "label_lengths"};
  ctc.min_inputs = ctc.max_inputs = 4;
  ctc.attrs = CtcAttrs();
  ctc.infer_types = InferCtcLoss;
  ctc.differentiable = true;
  ctc.summary = "CTC loss over unnormalised [T, N, C] scores (PyTorch's mean/sum, zero_infinity).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(ctc)));

  OpDef grad;
  grad.name = "CTCLossGradient";
  grad.family = "ctc";
  grad.input_names = {"activations", "labels", "input_lengths", "label_lengths"};
  grad.min_inputs = grad.max_inputs = 4;
  grad.attrs = CtcAttrs();
  // The constant gradient the objective gives the loss (Caffe's loss_weight), as the other
  // losses' backward ops take it.
  grad.attrs.push_back({"loss_weight", AttrKind::kFloat, AttrValue(1.0)});
  grad.infer_types = InferCtcLossGradient;
  grad.summary = "loss_weight times the CTC loss's gradient for its activations (forward redone).";
  return registry.Register(std::move(grad));
}

}  // namespace kiln
