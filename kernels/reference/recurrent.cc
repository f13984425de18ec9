// Reference RNN and RNNGradient (ops/recurrent_params.h): the primitive library's CPU oracle
// (dnn/rnn/rnn_reference.h, double precision) over the node's separate weight tensors, packed
// into the primitive's one-layer layout and back.
#include <vector>

#include "base/status_macros.h"
#include "dnn/rnn/rnn_reference.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/recurrent_params.h"

namespace kiln {

namespace {

// The node as a one-layer, one-direction primitive call.
struct Call {
  RecurrentAttrs attrs;
  RecurrentPorts ports;
  dnn::RnnDescriptor rnn;
  dnn::RnnSequences x, y;
  dnn::RnnWeightOffsets offsets;
  int64_t T = 0, N = 0, I = 0, H = 0, GH = 0;
};

absl::StatusOr<Call> CallOf(const Node& node, const DenseArgs& a, bool gradient) {
  Call c;
  KILN_ASSIGN_OR_RETURN(c.attrs, RecurrentAttrsOf(node, gradient));
  c.ports = RecurrentPortsOf(c.attrs);
  const TensorType& x = a.in_types[0];
  c.T = x.dim(0), c.N = x.dim(1), c.I = x.dim(2), c.H = c.attrs.hidden_size;
  c.GH = c.attrs.gates() * c.H;
  const dnn::RnnCell cell = c.attrs.cell == "lstm"       ? dnn::RnnCell::kLstm
                            : c.attrs.cell == "gru"      ? dnn::RnnCell::kGru
                            : c.attrs.cell == "rnn_relu" ? dnn::RnnCell::kRnnRelu
                                                         : dnn::RnnCell::kRnnTanh;
  const dnn::RnnBias bias = c.attrs.biases() == 2   ? dnn::RnnBias::kDouble
                            : c.attrs.biases() == 1 ? dnn::RnnBias::kInputOnly
                                                    : dnn::RnnBias::kNone;
  KILN_ASSIGN_OR_RETURN(c.rnn, dnn::RnnDescriptor::Create(cell, c.I, c.H, 1, false, bias));
  if (c.attrs.gate_order == "ifog") c.rnn.gate_order = dnn::RnnGateOrder::kIfog;
  KILN_ASSIGN_OR_RETURN(c.x,
                        dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, c.T, c.N, c.I));
  KILN_ASSIGN_OR_RETURN(c.y,
                        dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, c.T, c.N, c.H));
  c.offsets = dnn::RnnLayerWeights(c.rnn, 0, 0);
  return c;
}

std::vector<double> ToDouble(const float* p, int64_t n) {
  return p != nullptr ? std::vector<double>(p, p + n) : std::vector<double>();
}

void ToFloat(const std::vector<double>& v, int64_t at, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(v[at + i]);
}

// The node's weights in the primitive's packed order.
std::vector<double> PackWeights(const Call& c, const DenseArgs& a) {
  std::vector<double> w(dnn::RnnWeightCount(c.rnn));
  auto put = [&](int input, int64_t at, int64_t n) {
    for (int64_t i = 0; i < n; ++i) w[at + i] = a.in[input][i];
  };
  put(c.ports.w_ih, c.offsets.w_ih, c.GH * c.I);
  put(c.ports.w_hh, c.offsets.w_hh, c.GH * c.H);
  if (c.ports.b_ih >= 0) put(c.ports.b_ih, c.offsets.b_ih, c.GH);
  if (c.ports.b_hh >= 0) put(c.ports.b_hh, c.offsets.b_hh, c.GH);
  return w;
}

const float* InputOrNull(const DenseArgs& a, int index) {
  return index >= 0 ? a.in[index] : nullptr;
}

absl::Status Rnn(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(Call c, CallOf(node, a, false));
  const std::vector<double> x = ToDouble(a.in[0], c.T * c.N * c.I), w = PackWeights(c, a);
  const std::vector<double> cont = ToDouble(InputOrNull(a, c.ports.cont), c.T * c.N);
  const std::vector<double> h0 = ToDouble(InputOrNull(a, c.ports.h0), c.N * c.H);
  const std::vector<double> c0 = ToDouble(InputOrNull(a, c.ports.c0), c.N * c.H);
  std::vector<double> y(c.T * c.N * c.H), hy(c.N * c.H), cy(c.N * c.H);
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
  const std::vector<double> h0 = ToDouble(InputOrNull(a, p.h0), c.N * c.H);
  const std::vector<double> c0 = ToDouble(InputOrNull(a, p.c0), c.N * c.H);
  std::vector<double> dy = ToDouble(InputOrNull(a, p.dy), c.T * c.N * c.H);
  if (dy.empty()) dy.assign(c.T * c.N * c.H, 0);
  const std::vector<double> dh = ToDouble(InputOrNull(a, p.dh), c.N * c.H);
  const std::vector<double> dc = ToDouble(InputOrNull(a, p.dc), c.N * c.H);
  std::vector<double> dx(x.size()), dw(w.size(), 0), dh0(c.N * c.H), dc0(c.N * c.H);
  KILN_RETURN_IF_ERROR(dnn::reference::RnnBackward(
      c.rnn, c.x, x.data(), c.y, dy.data(), h0.empty() ? nullptr : h0.data(),
      c0.empty() ? nullptr : c0.data(), w.data(), cont.empty() ? nullptr : cont.data(),
      dh.empty() ? nullptr : dh.data(), dc.empty() ? nullptr : dc.data(), dx.data(), dh0.data(),
      dc0.data(), dw.data()));
  ToFloat(dx, 0, dx.size(), a.out[0]);
  ToFloat(dw, c.offsets.w_ih, c.GH * c.I, a.out[1]);
  ToFloat(dw, c.offsets.w_hh, c.GH * c.H, a.out[2]);
  if (p.db_ih >= 0) ToFloat(dw, c.offsets.b_ih, c.GH, a.out[p.db_ih]);
  if (p.db_hh >= 0) ToFloat(dw, c.offsets.b_hh, c.GH, a.out[p.db_hh]);
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
