// Recurrent layers as cuDNN describes them: a stack of RNN (tanh or ReLU), LSTM or GRU layers,
// one or two directions, over a batch of padded sequences of different lengths. The cell
// equations, gate orders and weight layout are PyTorch's (so a torch.nn.LSTM's parameters can be
// copied in order); Caffe's LSTM (gates i, f, o, g and its `cont` markers) maps onto them.
//
//   RNN:  h' = act(W_ih x + b_ih + W_hh h + b_hh)
//   LSTM: i, f, g, o = σ, σ, tanh, σ of (W_ih x + b_ih + W_hh h + b_hh), split in that order
//         c' = f c + i g,   h' = o tanh(c')
//   GRU:  r, z = σ of (W_ih x + b_ih + W_hh h + b_hh) for the first two gates
//         n = tanh(W_in x + b_in + r (W_hn h + b_hn)),   h' = (1 - z) n + z h
//
// A batch holds N sequences of lengths L_n <= T (the maximum). Step t of sequence n exists when
// t < L_n; the reverse direction of a bidirectional layer reads each sequence from its own last
// element (t = L_n - 1) back to 0. Outputs past a sequence's end are zero and its final state is
// the one after its last element. `cont` (Caffe's sequence-continuation markers, one per step
// and sequence, unidirectional only) multiplies the previous h and c before step t: 0 starts a
// new sequence inside the batch's row.
#ifndef KILN_DNN_RNN_RNN_DESCRIPTOR_H_
#define KILN_DNN_RNN_RNN_DESCRIPTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace kiln {
namespace dnn {

enum class RnnCell { kRnnRelu, kRnnTanh, kLstm, kGru };
// Which biases a layer has (cuDNN's bias modes): both b_ih and b_hh, b_ih alone (Caffe's LSTM),
// or none. A missing bias is zero and has no gradient.
enum class RnnBias { kDouble, kInputOnly, kNone };
// The order of the LSTM's four gate blocks in W_ih, W_hh and the biases: PyTorch's and cuDNN's
// i, f, g, o, or Caffe's i, f, o, g (its LSTMUnit). Other cells have one order.
enum class RnnGateOrder { kIfgo, kIfog };
// Sequence-major x is [T, N, features] (cuDNN's default, Caffe's), batch-major [N, T, features]
// (PyTorch's batch_first). Both are packed.
enum class RnnLayout { kSequenceMajor, kBatchMajor };

struct RnnDescriptor {
  RnnCell cell = RnnCell::kLstm;
  RnnBias bias = RnnBias::kDouble;
  int64_t input_size = 0, hidden_size = 0, layers = 1;
  bool bidirectional = false;
  // Dropout on each layer's output before the next layer reads it (training only, not after the
  // last layer): element e of layer l's output is kept when DropoutKeep(seed + l, e, ratio),
  // e its index in the [T, N, directions * hidden] sequence-major order, whatever the layout.
  double dropout = 0;
  uint64_t dropout_seed = 0;
  RnnGateOrder gate_order = RnnGateOrder::kIfgo;  // LSTM only; set after Create

  static absl::StatusOr<RnnDescriptor> Create(RnnCell cell, int64_t input_size, int64_t hidden_size,
                                              int64_t layers = 1, bool bidirectional = false,
                                              RnnBias bias = RnnBias::kDouble, double dropout = 0,
                                              uint64_t dropout_seed = 0);

  int directions() const { return bidirectional ? 2 : 1; }
  // Gates per cell: 1 for RNN, 4 for LSTM, 3 for GRU.
  int gates() const;
  // Features of layer l's input: input_size for layer 0, directions * hidden_size above.
  int64_t LayerInputSize(int64_t layer) const;
  // The block of LSTM gate `logical` (0 i, 1 f, 2 g, 3 o) in the weights' order.
  int LstmBlock(int logical) const {
    return gate_order == RnnGateOrder::kIfog && logical >= 2 ? 5 - logical : logical;
  }
  std::string ToString() const;
};

// Where one (layer, direction)'s parameters sit in the packed weight buffer, in elements: W_ih
// [gates * hidden, layer input] row-major, W_hh [gates * hidden, hidden], then b_ih and b_hh
// (gates * hidden each, -1 when the bias mode has none). Layers follow one another, and within a
// layer the forward direction comes first: PyTorch's parameter order.
struct RnnWeightOffsets {
  int64_t w_ih = 0, w_hh = 0, b_ih = -1, b_hh = -1;
};
RnnWeightOffsets RnnLayerWeights(const RnnDescriptor& rnn, int64_t layer, int direction);
// Elements of the whole weight buffer (and of its gradient).
int64_t RnnWeightCount(const RnnDescriptor& rnn);

// A batch of padded sequences: T, N, the features per step and each sequence's length (host).
struct RnnSequences {
  RnnLayout layout = RnnLayout::kSequenceMajor;
  int64_t max_length = 0, batch = 0, features = 0;
  std::vector<int32_t> lengths;  // N values in [0, max_length]; empty means all max_length

  static absl::StatusOr<RnnSequences> Create(RnnLayout layout, int64_t max_length, int64_t batch,
                                             int64_t features, std::vector<int32_t> lengths = {});
  int32_t length(int64_t n) const {
    return lengths.empty() ? static_cast<int32_t>(max_length) : lengths[n];
  }
  int64_t elements() const { return max_length * batch * features; }
  // The element offset of (t, n, feature 0).
  int64_t Offset(int64_t t, int64_t n) const {
    return layout == RnnLayout::kSequenceMajor ? (t * batch + n) * features
                                               : (n * max_length + t) * features;
  }
  std::string ToString() const;
};

// The shapes of one RNN call, checked together: x has the layer input size, y directions *
// hidden features, both the same T, N, layout and lengths; `cont` only for one direction.
// Hidden and cell states (hx, cx, hy, cy and their gradients) are [layers * directions, N,
// hidden] packed, layer-major then direction.
absl::Status CheckRnnCall(const RnnDescriptor& rnn, const RnnSequences& x, const RnnSequences& y,
                          bool has_cont, const char* where);

// Elements of one hidden (or cell) state tensor: layers * directions * N * hidden.
int64_t RnnStateCount(const RnnDescriptor& rnn, int64_t batch);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_RNN_RNN_DESCRIPTOR_H_
