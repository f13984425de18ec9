// LSTMUnit (Caffe's LSTMUnitLayer): one LSTM cell step with the gate pre-activations given.
//
//   LSTMUnit(c_prev [T, N, D], x [T, N, 4D], cont [T, N]) -> c [T, N, D], h [T, N, D]
//
// x holds the gates in Caffe's order i, f, o, g (x[t, n, 0:D] is i, ...). With i, f, o the
// sigmoids and g the tanh of their slices: c = cont f c_prev + i g, h = o tanh(c). Caffe's layer
// takes T = 1 (its importer checks that); the op runs any T, each step on its own. cont is a
// number per (t, n) (Caffe's sequence continuation marker, 0 or 1) and may have any float dtype.
//
// LSTMUnitGradient(c_prev, x, cont, dc?, dh?) -> dc_prev [T, N, D], dx [T, N, 4D], from the
// output gradients present (has_dc, has_dh): the gates are recomputed from x (cheap, and the
// forward keeps nothing). cont gets no gradient: it is data, and Caffe refuses to give it one.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// Checks the forward's three inputs; returns [T, N, D].
absl::StatusOr<std::vector<int64_t>> CheckUnitInputs(const InferContext& ctx) {
  const TensorType& c_prev = ctx.input(0);
  const TensorType& x = ctx.input(1);
  const TensorType& cont = ctx.input(2);
  KILN_RETURN_IF_ERROR(RequireFloat(c_prev, "c_prev"));
  KILN_RETURN_IF_ERROR(RequireFloat(x, "x"));
  KILN_RETURN_IF_ERROR(RequireFloat(cont, "cont"));
  if (c_prev.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("c_prev must be [T, N, D], got ", DimsToString(c_prev.dims())));
  }
  if (x.dtype() != c_prev.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("x is ", x.ToString(), "; c_prev is ", c_prev.ToString()));
  }
  const int64_t T = c_prev.dim(0), N = c_prev.dim(1), D = c_prev.dim(2);
  KILN_RETURN_IF_ERROR(RequireDims(x, {T, N, 4 * D}, "x (the gates i, f, o, g)"));
  KILN_RETURN_IF_ERROR(RequireDims(cont, {T, N}, "cont"));
  return std::vector<int64_t>{T, N, D};
}

absl::StatusOr<std::vector<TensorType>> InferLstmUnit(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> tnd, CheckUnitInputs(ctx));
  KILN_ASSIGN_OR_RETURN(TensorType c, OutputLike(ctx.input(0), tnd));
  return std::vector<TensorType>{c, c};
}

absl::StatusOr<std::vector<TensorType>> InferLstmUnitGradient(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> tnd, CheckUnitInputs(ctx));
  const bool has_dc = ctx.GetBool("has_dc"), has_dh = ctx.GetBool("has_dh");
  if (!has_dc && !has_dh) {
    return absl::InvalidArgumentError("needs dc or dh (has_dc and has_dh are both false)");
  }
  const int want = 3 + has_dc + has_dh;
  if (ctx.num_inputs() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("has_dc ", has_dc ? "true" : "false", " and has_dh ",
                     has_dh ? "true" : "false", " give ", want, " inputs, got ", ctx.num_inputs()));
  }
  const TensorType& c_prev = ctx.input(0);
  for (int i = 3; i < want; ++i) {
    const char* what = i == 3 && has_dc ? "dc" : "dh";
    KILN_RETURN_IF_ERROR(RequireDims(ctx.input(i), tnd, what));
    if (ctx.input(i).dtype() != c_prev.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", ctx.input(i).ToString(), "; c_prev is ", c_prev.ToString()));
    }
  }
  KILN_ASSIGN_OR_RETURN(TensorType dc_prev, OutputLike(c_prev, tnd));
  KILN_ASSIGN_OR_RETURN(TensorType dx, OutputLike(c_prev, ctx.input(1).dims()));
  return std::vector<TensorType>{dc_prev, dx};
}

}  // namespace

absl::Status RegisterLstmUnitOps(OpRegistry& registry) {
  OpDef unit;
  unit.name = "LSTMUnit";
  unit.family = "lstm_unit";
  unit.input_names = {"c_prev", "x", "cont"};
  unit.min_inputs = unit.max_inputs = 3;
  unit.infer_types = InferLstmUnit;
  unit.differentiable = true;
  unit.summary =
      "One LSTM cell step from gate pre-activations (i f o g) and cont: c, h (Caffe LSTMUnit).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(unit)));

  OpDef grad;
  grad.name = "LSTMUnitGradient";
  grad.family = "lstm_unit";
  grad.input_names = {"c_prev", "x", "cont", "dc", "dh"};
  grad.min_inputs = 4;
  grad.max_inputs = 5;
  grad.attrs = {{"has_dc", AttrKind::kBool, AttrValue(true)},
                {"has_dh", AttrKind::kBool, AttrValue(true)}};
  grad.infer_types = InferLstmUnitGradient;
  grad.summary = "Gradients of an LSTMUnit's c_prev and gate input from dc and/or dh.";
  return registry.Register(std::move(grad));
}

}  // namespace kiln
