// Reference RNN and RNNGradient (ops/recurrent_params.h): the primitive library's CPU oracle
// (dnn/rnn/rnn_reference.h, double precision) over the node's separate weight tensors, packed
// into the primitive's one-layer layout and back.
#include <array>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "dnn/rnn/rnn_reference.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/recurrent_params.h"

namespace kiln {

namespace {

// The node as a one-layer primitive call (one direction or two).
struct Call {
  RecurrentAttrs attrs;
  RecurrentPorts ports;
  dnn::RnnDescriptor rnn;
  dnn::RnnSequences x, y;
  dnn::RnnWeightOffsets offsets[2];  // per direction
  int64_t T = 0, N = 0, I = 0, H = 0, GH = 0, D = 1;
};

absl::StatusOr<Call> CallOf(const Node& node, const DenseArgs& a, bool gradient) {
  Call c;
  KILN_ASSIGN_OR_RETURN(c.attrs, RecurrentAttrsOf(node, gradient));
  c.ports = RecurrentPortsOf(c.attrs);
  const TensorType& x = a.in_types[0];
  c.T = x.dim(0), c.N = x.dim(1), c.I = x.dim(2), c.H = c.attrs.hidden_size;
  c.GH = c.attrs.gates() * c.H;
  c.D = c.attrs.directions();
  const dnn::RnnCell cell = c.attrs.cell == "lstm"       ? dnn::RnnCell::kLstm
                            : c.attrs.cell == "gru"      ? dnn::RnnCell::kGru
                            : c.attrs.cell == "rnn_relu" ? dnn::RnnCell::kRnnRelu
                                                         : dnn::RnnCell::kRnnTanh;
  const dnn::RnnBias bias = c.attrs.biases() == 2   ? dnn::RnnBias::kDouble
                            : c.attrs.biases() == 1 ? dnn::RnnBias::kInputOnly
                                                    : dnn::RnnBias::kNone;
  KILN_ASSIGN_OR_RETURN(c.rnn,
                        dnn::RnnDescriptor::Create(cell, c.I, c.H, 1, c.attrs.bidirectional, bias));
  if (c.attrs.gate_order == "ifog") c.rnn.gate_order = dnn::RnnGateOrder::kIfog;
  KILN_ASSIGN_OR_RETURN(c.x,
                        dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, c.T, c.N, c.I));
  KILN_ASSIGN_OR_RETURN(
      c.y, dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, c.T, c.N, c.D * c.H));
  for (int d = 0; d < c.D; ++d) c.offsets[d] = dnn::RnnLayerWeights(c.rnn, 0, d);
  return c;
}

std::vector<double> ToDouble(const float* p, int64_t n) {
  return p != nullptr ? std::vector<double>(p, p + n) : std::vector<double>();
}

void ToFloat(const std::vector<double>& v, int64_t at, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(v[at + i]);
}

// The node's ports of direction d's weights: w_ih, w_hh, b_ih, b_hh (-1: absent), in the
// node's inputs or, with `gradient_outputs`, RNNGradient's outputs.
std::array<int, 4> WeightPorts(const RecurrentPorts& p, int d, bool gradient_outputs) {
  if (gradient_outputs) {
    return d == 0 ? std::array<int, 4>{1, 2, p.db_ih, p.db_hh}
                  : std::array<int, 4>{p.dw_ih_r, p.dw_hh_r, p.db_ih_r, p.db_hh_r};
  }
  return d == 0 ? std::array<int, 4>{p.w_ih, p.w_hh, p.b_ih, p.b_hh}
                : std::array<int, 4>{p.w_ih_r, p.w_hh_r, p.b_ih_r, p.b_hh_r};
}

// Where each of direction d's four weights sits in the packed buffer, and its element count.
std::array<std::pair<int64_t, int64_t>, 4> WeightSpans(const Call& c, int d) {
  const dnn::RnnWeightOffsets& o = c.offsets[d];
  return {std::make_pair(o.w_ih, c.GH * c.I), std::make_pair(o.w_hh, c.GH * c.H),
          std::make_pair(o.b_ih, c.GH), std::make_pair(o.b_hh, c.GH)};
}

// The node's weights in the primitive's packed order.
std::vector<double> PackWeights(const Call& c, const DenseArgs& a) {
  std::vector<double> w(dnn::RnnWeightCount(c.rnn));
  for (int d = 0; d < c.D; ++d) {
    const std::array<int, 4> ports = WeightPorts(c.ports, d, false);
    const auto spans = WeightSpans(c, d);
    for (int k = 0; k < 4; ++k) {
      if (ports[k] < 0) continue;
      for (int64_t i = 0; i < spans[k].second; ++i) w[spans[k].first + i] = a.in[ports[k]][i];
    }
  }
  return w;
}

const float* InputOrNull(const DenseArgs& a, int index) {
  return index >= 0 ? a.in[index] : nullptr;
}

absl::Status Rnn(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(Call c, CallOf(node, a, false));
  const std::vector<double> x = ToDouble(a.in[0], c.T * c.N * c.I), w = PackWeights(c, a);
  const std::vector<double> cont = ToDouble(InputOrNull(a, c.ports.cont), c.T * c.N);
  const int64_t states = c.D * c.N * c.H;
  const std::vector<double> h0 = ToDouble(InputOrNull(a, c.ports.h0), states);
  const std::vector<double> c0 = ToDouble(InputOrNull(a, c.ports.c0), states);
  std::vector<double> y(c.T * c.N * c.D * c.H), hy(states), cy(states);
  KILN_RETURN_IF_ERROR(dnn::reference::RnnForward(
      c.rnn, /*training=*/false, c.x, x.data(), c.y, y.data(), h0.empty() ? nullptr : h0.data(),
      c0.empty() ? nullptr : c0.data(), w.data(), cont.empty() ? nullptr : cont.data(), hy.data(),
      cy.data()));
  ToFloat(y, 0, y.size(), a.out[0]);
  ToFloat(hy, 0, hy.size(), a.out[1]);
  if (c.attrs.lstm()) ToFloat(cy, 0, cy.size(), a.out[2]);
  return absl::OkStatus();
}

absl::Status RnnGradient(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(Call c, CallOf(node, a, true));
  const RecurrentPorts& p = c.ports;
  const std::vector<double> x = ToDouble(a.in[0], c.T * c.N * c.I), w = PackWeights(c, a);
  const std::vector<double> cont = ToDouble(InputOrNull(a, p.cont), c.T * c.N);
  const int64_t states = c.D * c.N * c.H, ys = c.T * c.N * c.D * c.H;
  const std::vector<double> h0 = ToDouble(InputOrNull(a, p.h0), states);
  const std::vector<double> c0 = ToDouble(InputOrNull(a, p.c0), states);
  std::vector<double> dy = ToDouble(InputOrNull(a, p.dy), ys);
  if (dy.empty()) dy.assign(ys, 0);
  const std::vector<double> dh = ToDouble(InputOrNull(a, p.dh), states);
  const std::vector<double> dc = ToDouble(InputOrNull(a, p.dc), states);
  std::vector<double> dx(x.size()), dw(w.size(), 0), dh0(states), dc0(states);
  KILN_RETURN_IF_ERROR(dnn::reference::RnnBackward(
      c.rnn, c.x, x.data(), c.y, dy.data(), h0.empty() ? nullptr : h0.data(),
      c0.empty() ? nullptr : c0.data(), w.data(), cont.empty() ? nullptr : cont.data(),
      dh.empty() ? nullptr : dh.data(), dc.empty() ? nullptr : dc.data(), dx.data(), dh0.data(),
      dc0.data(), dw.data()));
  ToFloat(dx, 0, dx.size(), a.out[0]);
  for (int d = 0; d < c.D; ++d) {
    const std::array<int, 4> outs = WeightPorts(p, d, true);
    const auto spans = WeightSpans(c, d);
    for (int k = 0; k < 4; ++k) {
      if (outs[k] >= 0) ToFloat(dw, spans[k].first, spans[k].second, a.out[outs[k]]);
    }
  }
  if (p.dh0 >= 0) ToFloat(dh0, 0, dh0.size(), a.out[p.dh0]);
  if (p.dc0 >= 0) ToFloat(dc0, 0, dc0.size(), a.out[p.dc0]);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceRecurrent(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "RNN", Rnn));
  return RegisterReference(registry, "RNNGradient", RnnGradient);
}

}  // namespace kiln
