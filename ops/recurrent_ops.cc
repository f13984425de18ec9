// Recurrent layers: RNN, one layer of an RNN (tanh or ReLU), LSTM or GRU cell run over a
// sequence-major batch [T, N, I] in one direction or both, and RNNGradient, its backward
// (ops/recurrent_params.h has the ports). The cell equations are dnn/rnn/rnn_descriptor.h's;
// `cont` (Caffe's sequence continuation markers, 0 or 1 per step and sequence) multiplies the
// previous h and c. A stack is several RNN nodes, each reading the one below's y.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/recurrent_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

std::vector<AttrDef> RecurrentAttrDefs(bool gradient) {
  std::vector<AttrDef> attrs = {{"cell", AttrKind::kString, AttrValue(std::string("lstm"))},
                                {"hidden_size", AttrKind::kInt, std::nullopt},
                                {"bias", AttrKind::kString, AttrValue(std::string("double"))},
                                {"gate_order", AttrKind::kString, AttrValue(std::string("ifgo"))},
                                {"has_cont", AttrKind::kBool, AttrValue(false)},
                                {"has_initial_state", AttrKind::kBool, AttrValue(false)},
                                {"bidirectional", AttrKind::kBool, AttrValue(false)}};
  if (gradient) {
    attrs.push_back({"has_dy", AttrKind::kBool, AttrValue(true)});
    attrs.push_back({"has_dh", AttrKind::kBool, AttrValue(false)});
    attrs.push_back({"has_dc", AttrKind::kBool, AttrValue(false)});
  }
  return attrs;
}

// The dims of a state (h0, c0, h_T, c_T): [N, H], or [2, N, H] for both directions.
std::vector<int64_t> StateDims(const RecurrentAttrs& a, int64_t N) {
  if (a.bidirectional) return {2, N, a.hidden_size};
  return {N, a.hidden_size};
}

// Checks the forward's inputs; returns (T, N, I).
absl::StatusOr<std::vector<int64_t>> CheckForwardInputs(const InferContext& ctx,
                                                        const RecurrentAttrs& a,
                                                        const RecurrentPorts& p) {
  if (ctx.num_inputs() < p.forward_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("the attributes (bias ", a.bias, a.has_cont ? ", cont" : "",
                     a.has_initial_state ? ", initial state" : "", ") need ", p.forward_inputs,
                     " inputs, got ", ctx.num_inputs()));
  }
  const TensorType& x = ctx.input(p.x);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "x"));
  if (x.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("x must be [T, N, I], got ", DimsToString(x.dims())));
  }
  const int64_t T = x.dim(0), N = x.dim(1), I = x.dim(2), H = a.hidden_size,
                GH = a.gates() * a.hidden_size;
  for (int i = 1; i < p.forward_inputs; ++i) {
    if (ctx.input(i).dtype() != x.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " is ", ctx.input(i).ToString(), "; x is ", x.ToString()));
    }
  }
  KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.w_ih), {GH, I}, "w_ih"));
  KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.w_hh), {GH, H}, "w_hh"));
  if (p.b_ih >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.b_ih), {GH}, "b_ih"));
  if (p.b_hh >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.b_hh), {GH}, "b_hh"));
  if (p.w_ih_r >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.w_ih_r), {GH, I}, "w_ih_r"));
  if (p.w_hh_r >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.w_hh_r), {GH, H}, "w_hh_r"));
  if (p.b_ih_r >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.b_ih_r), {GH}, "b_ih_r"));
  if (p.b_hh_r >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.b_hh_r), {GH}, "b_hh_r"));
  if (p.cont >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.cont), {T, N}, "cont"));
  const std::vector<int64_t> state = StateDims(a, N);
  if (p.h0 >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.h0), state, "h0"));
  if (p.c0 >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.c0), state, "c0"));
  return std::vector<int64_t>{T, N, I};
}

absl::StatusOr<std::vector<TensorType>> InferRnn(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(ctx, /*gradient=*/false));
  const RecurrentPorts p = RecurrentPortsOf(a);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> tni, CheckForwardInputs(ctx, a, p));
  if (ctx.num_inputs() != p.forward_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("the attributes give ", p.forward_inputs, " inputs, got ", ctx.num_inputs()));
  }
  const TensorType& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(TensorType y,
                        OutputLike(x, {tni[0], tni[1], a.directions() * a.hidden_size}));
  KILN_ASSIGN_OR_RETURN(TensorType h, OutputLike(x, StateDims(a, tni[1])));
  std::vector<TensorType> out = {y, h};
  if (a.lstm()) out.push_back(h);
  return out;
}

absl::StatusOr<std::vector<TensorType>> InferRnnGradient(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(ctx, /*gradient=*/true));
  const RecurrentPorts p = RecurrentPortsOf(a);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> tni, CheckForwardInputs(ctx, a, p));
  if (ctx.num_inputs() != p.gradient_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("the attributes give ", p.gradient_inputs, " inputs, got ", ctx.num_inputs()));
  }
  const int64_t T = tni[0], N = tni[1], DH = a.directions() * a.hidden_size;
  if (p.dy >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.dy), {T, N, DH}, "dy"));
  if (p.dh >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.dh), StateDims(a, N), "dh_T"));
  if (p.dc >= 0) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(p.dc), StateDims(a, N), "dc_T"));
  std::vector<TensorType> out;
  for (int i :
       {p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh, p.w_ih_r, p.w_hh_r, p.b_ih_r, p.b_hh_r, p.h0, p.c0}) {
    if (i < 0) continue;
    KILN_ASSIGN_OR_RETURN(TensorType t, OutputLike(ctx.input(0), ctx.input(i).dims()));
    out.push_back(t);
  }
  return out;
}

}  // namespace

absl::Status RegisterRecurrentOps(OpRegistry& registry) {
  OpDef rnn;
  rnn.name = "RNN";
  rnn.family = "recurrent";
  // The names of the inputs a unidirectional node with every option has (ports move with the
  // attributes: ops/recurrent_params.h).
  rnn.input_names = {"x", "w_ih", "w_hh", "b_ih", "b_hh", "cont", "h0", "c0"};
  rnn.min_inputs = 3;
  rnn.max_inputs = 11;
  rnn.attrs = RecurrentAttrDefs(false);
  rnn.infer_types = InferRnn;
  rnn.differentiable = true;
  rnn.weight_inputs = {1, 2, 3, 4, 5, 6, 7, 8};
  rnn.summary =
      "One recurrent layer (RNN, LSTM or GRU cell; one direction or both) over [T, N, I]: y, "
      "h_T (and c_T); Caffe's LSTM and RNN.";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(rnn)));

  OpDef grad;
  grad.name = "RNNGradient";
  grad.family = "recurrent";
  grad.input_names = {"x",  "w_ih", "w_hh", "b_ih", "b_hh", "cont",
                      "h0", "c0",   "dy",   "dh_T", "dc_T"};
  grad.min_inputs = 3;
  grad.max_inputs = 14;
  grad.attrs = RecurrentAttrDefs(true);
  grad.infer_types = InferRnnGradient;
  grad.summary = "Gradients of an RNN node's input, weights and initial state.";
  return registry.Register(std::move(grad));
}

}  // namespace kiln
