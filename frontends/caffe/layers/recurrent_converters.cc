// Caffe unrolls its recurrent layers into a net of InnerProduct, Eltwise and LSTMUnit layers
// per time step; Kiln imports each as one RNN node (the whole sequence in one op), with Caffe's
// parameter blobs as the node's weights, unchanged: the LSTM's gate order (i, f, o, g) is an
// attribute of the op rather than a permutation of the blobs, so a trained net saves back to a
// .caffemodel Caffe reads. A static input (x_static [N, ...], the third bottom, added through its
// own weight W_xc_static at every step) is tiled over time and concatenated to x, with the weights
// concatenated likewise, so the RNN node sees one input projection; the blobs stay Caffe's.
//
// Without expose_hidden, Caffe's layer copies its final h (and c) into its own initial state
// before each forward, so a forward that starts with cont = 1 continues from the previous one's
// end (training on a long text cut into batches, streamed generation). A graph keeps no state,
// so with CaffeImportOptions::carry_recurrent_state the initial state becomes a graph input and
// the final state a graph output, a pair the caller carries from run to run (the trainer does,
// per net). Without it every run starts from zeros: Caffe's first forward, and Caffe's every
// forward whenever cont is 0 at t = 0.
#include "frontends/caffe/layers/recurrent_converters.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

using Ints = std::vector<int64_t>;

// A Reshape node named after the layer plus `suffix`.
absl::StatusOr<Value> Reshaped(LayerBuilder& b, Value v, const Ints& dims,
                               absl::string_view suffix) {
  if (v.type().dims() == dims) return v;
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("Reshape", suffix, {v}, {{"shape", dims}}));
  return node->output(0);
}

// The static input folded into the input projection: x_static [N, S...] becomes [T, N, S]
// concatenated after x's I features, and W_x_static [GH, S] (Caffe's third blob) is concatenated
// after W_x's columns: W [x; x_static] = W_x x + W_x_static x_static at every step, as Caffe adds
// it. Returns the new x and W_ih.
absl::StatusOr<std::pair<Value, Value>> WithStaticInput(LayerBuilder& b, const Value& x3,
                                                        const Value& w_ih,
                                                        const caffe::RecurrentParameter& p,
                                                        int64_t gate_rows) {
  const int64_t T = x3.type().dim(0), N = x3.type().dim(1);
  const TensorType& xs = b.bottoms()[2].type();
  if (xs.rank() < 1 || xs.dim(0) != N) {
    return b.Invalid(absl::StrCat("x_static ", xs.ToString(), " must be [N, ...] with N = ", N,
                                  ", x's second axis"));
  }
  int64_t S = 1;
  for (int d = 1; d < xs.rank(); ++d) S *= xs.dim(d);
  KILN_ASSIGN_OR_RETURN(Value w_static,
                        b.Param(2, {gate_rows, S}, p.weight_filler(), true, "weight"));
  KILN_ASSIGN_OR_RETURN(Value one_step, Reshaped(b, b.bottoms()[2], {1, N, S}, "x_static"));
  KILN_ASSIGN_OR_RETURN(Node * tiled, b.AddNode("Tile", "x_static_tiled", {one_step},
                                                {{"axis", int64_t{0}}, {"tiles", T}}));
  KILN_ASSIGN_OR_RETURN(Node * x, b.AddNode("Concat", "x_with_static", {x3, tiled->output(0)},
                                            {{"axis", int64_t{2}}}));
  KILN_ASSIGN_OR_RETURN(
      Node * w, b.AddNode("Concat", "w_with_static", {w_ih, w_static}, {{"axis", int64_t{1}}}));
  return std::make_pair(x->output(0), w->output(0));
}

absl::Status Recurrent(LayerBuilder& b, bool lstm) {
  const caffe::RecurrentParameter& p = b.layer().recurrent_param();
  const bool expose = p.expose_hidden();
  const int states = lstm ? 2 : 1;  // h (and c)
  const int bottoms = static_cast<int>(b.bottoms().size());
  const bool has_static = bottoms == 3 + (expose ? states : 0);
  const int first_state = has_static ? 3 : 2;
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 2 + (expose ? states : 0), 3 + (expose ? states : 0)));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1 + (expose ? states : 0), 1 + (expose ? states : 0)));
  if (!p.has_num_output() || p.num_output() == 0) {
    return b.Invalid("recurrent_param.num_output missing or 0");
  }
  const int64_t H = p.num_output(), G = lstm ? 4 : 1;
  const TensorType& x = b.bottoms()[0].type();
  if (x.rank() < 2) {
    return b.Invalid(absl::StrCat("x ", x.ToString(), " needs at least 2 axes (T, N, ...)"));
  }
  const int64_t T = x.dim(0), N = x.dim(1);
  int64_t I = 1;
  for (int d = 2; d < x.rank(); ++d) I *= x.dim(d);
  const TensorType& cont = b.bottoms()[1].type();
  if (cont.dims() != Ints{T, N}) {
    return b.Invalid(absl::StrCat("cont ", cont.ToString(), " must be [T, N] = [", T, ", ", N,
                                  "], x's first two axes"));
  }
  // Caffe's blobs: W_x, b, then W_x_static with a static input, then W_h (and the RNN's W_o,
  // b_o).
  const int w_hh_blob = has_static ? 3 : 2;
  b.ExpectParams(w_hh_blob + 1 + (lstm ? 0 : 2));
  KILN_ASSIGN_OR_RETURN(Value w_ih, b.Param(0, {G * H, I}, p.weight_filler(), true, "weight"));
  KILN_ASSIGN_OR_RETURN(Value b_ih, b.Param(1, {G * H}, p.bias_filler(), true, "bias"));
  KILN_ASSIGN_OR_RETURN(Value x3, Reshaped(b, b.bottoms()[0], {T, N, I}, "x"));
  if (has_static) {
    KILN_ASSIGN_OR_RETURN(std::tie(x3, w_ih), WithStaticInput(b, x3, w_ih, p, G * H));
  }
  KILN_ASSIGN_OR_RETURN(Value w_hh,
                        b.Param(w_hh_blob, {G * H, H}, p.weight_filler(), true, "weight"));
  std::vector<Value> inputs = {x3, w_ih, w_hh, b_ih, b.bottoms()[1]};
  const bool carried = !expose && b.carry_recurrent_state();
  for (int s = 0; s < (carried ? states : 0); ++s) {
    KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(x3.type().dtype(), {N, H}));
    KILN_ASSIGN_OR_RETURN(Value state, b.CarriedStateInput(s == 0 ? "h" : "c", type));
    inputs.push_back(state);
  }
  for (int s = 0; s < (expose ? states : 0); ++s) {
    const Value& v = b.bottoms()[first_state + s];
    if (v.type().dims() != Ints{1, N, H}) {
      return b.Invalid(absl::StrCat(s == 0 ? "h_0 " : "c_0 ", v.type().ToString(),
                                    " must be [1, N, H] = [1, ", N, ", ", H, "]"));
    }
    KILN_ASSIGN_OR_RETURN(Value state, Reshaped(b, v, {N, H}, s == 0 ? "h_0" : "c_0"));
    inputs.push_back(state);
  }
  AttrMap attrs = {{"cell", std::string(lstm ? "lstm" : "rnn_tanh")},
                   {"hidden_size", H},
                   {"bias", std::string("input")},
                   {"gate_order", std::string(lstm ? "ifog" : "ifgo")},
                   {"has_cont", true},
                   {"has_initial_state", expose || carried}};
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("RNN", "", inputs, attrs));
  Value top = node->output(0);
  if (!lstm) {  // Caffe's RNN outputs o_t = tanh(W_ho h_t + b_o)
    KILN_ASSIGN_OR_RETURN(Value w_ho,
                          b.Param(w_hh_blob + 1, {H, H}, p.weight_filler(), true, "weight"));
    KILN_ASSIGN_OR_RETURN(Value b_o, b.Param(w_hh_blob + 2, {H}, p.bias_filler(), true, "bias"));
    KILN_ASSIGN_OR_RETURN(Node * ip, b.AddNode("InnerProduct", "o", {top, w_ho, b_o},
                                               {{"axis", int64_t{2}}, {"transpose", false}}));
    KILN_ASSIGN_OR_RETURN(Node * tanh, b.AddNode("TanH", "o_tanh", {ip->output(0)}, {}));
    top = tanh->output(0);
  }
  for (int s = 0; s < (carried ? states : 0); ++s) {
    KILN_RETURN_IF_ERROR(b.CarryOut(s == 0 ? "h" : "c", node->output(1 + s)));
  }
  std::vector<Value> tops = {top};
  for (int s = 0; s < (expose ? states : 0); ++s) {
    KILN_ASSIGN_OR_RETURN(Value state,
                          Reshaped(b, node->output(1 + s), {1, N, H}, s == 0 ? "h_T" : "c_T"));
    tops.push_back(state);
  }
  b.SetTops(tops);
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertLstm(LayerBuilder& b) { return Recurrent(b, /*lstm=*/true); }
absl::Status ConvertRnn(LayerBuilder& b) { return Recurrent(b, /*lstm=*/false); }

}  // namespace kiln
