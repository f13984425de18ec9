#include "dnn/rnn/rnn_descriptor.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace dnn {

namespace {

// Sizes are limited so that every element count and offset of a call fits in int64 with room,
// and every GEMM dimension in cuBLAS's int.
constexpr int64_t kMaxSize = int64_t{1} << 30;

absl::Status Invalid(absl::string_view where, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", detail));
}

const char* CellName(RnnCell cell) {
  switch (cell) {
    case RnnCell::kRnnRelu:
      return "rnn_relu";
    case RnnCell::kRnnTanh:
      return "rnn_tanh";
    case RnnCell::kLstm:
      return "lstm";
    case RnnCell::kGru:
      return "gru";
  }
  return "?";
}

}  // namespace

absl::StatusOr<RnnDescriptor> RnnDescriptor::Create(RnnCell cell, int64_t input_size,
                                                    int64_t hidden_size, int64_t layers,
                                                    bool bidirectional, RnnBias bias,
                                                    double dropout, uint64_t dropout_seed) {
  const char* where = "RNN descriptor";
  if (static_cast<int>(cell) < 0 || static_cast<int>(cell) > static_cast<int>(RnnCell::kGru)) {
    return Invalid(where, absl::StrCat("unknown cell ", static_cast<int>(cell)));
  }
  if (static_cast<int>(bias) < 0 || static_cast<int>(bias) > static_cast<int>(RnnBias::kNone)) {
    return Invalid(where, absl::StrCat("unknown bias mode ", static_cast<int>(bias)));
  }
  if (input_size < 1 || input_size > kMaxSize) {
    return Invalid(where, absl::StrCat("input_size is ", input_size, " (must be 1..2^30)"));
  }
  if (hidden_size < 1 || hidden_size > kMaxSize / 4) {
    return Invalid(where, absl::StrCat("hidden_size is ", hidden_size, " (must be 1..2^28)"));
  }
  if (layers < 1 || layers > 1024) {
    return Invalid(where, absl::StrCat("layers is ", layers, " (must be 1..1024)"));
  }
  if (!(dropout >= 0 && dropout < 1)) {
    return Invalid(where, absl::StrCat("dropout is ", dropout, " (must be in [0, 1))"));
  }
  RnnDescriptor d;
  d.cell = cell;
  d.bias = bias;
  d.input_size = input_size;
  d.hidden_size = hidden_size;
  d.layers = layers;
  d.bidirectional = bidirectional;
  d.dropout = dropout;
  d.dropout_seed = dropout_seed;
  // The whole weight buffer must be addressable with room: refuse a stack whose parameters
  // overflow (layers x gates x hidden x (input + hidden) can exceed int64 for absurd sizes).
  const double count = static_cast<double>(layers) * d.directions() * d.gates() * hidden_size *
                       (std::max(input_size, d.directions() * hidden_size) + hidden_size + 2);
  if (count > static_cast<double>(std::numeric_limits<int64_t>::max() / 8)) {
    return Invalid(where, absl::StrCat(d.ToString(), " has too many parameters"));
  }
  return d;
}

int RnnDescriptor::gates() const {
  switch (cell) {
    case RnnCell::kLstm:
      return 4;
    case RnnCell::kGru:
      return 3;
    default:
      return 1;
  }
}

int64_t RnnDescriptor::LayerInputSize(int64_t layer) const {
  return layer == 0 ? input_size : directions() * hidden_size;
}

std::string RnnDescriptor::ToString() const {
  return absl::StrCat(CellName(cell), " input ", input_size, " hidden ", hidden_size, " layers ",
                      layers, bidirectional ? " bidirectional" : "",
                      bias == RnnBias::kDouble      ? ""
                      : bias == RnnBias::kInputOnly ? " input bias only"
                                                    : " no bias",
                      dropout > 0 ? absl::StrCat(" dropout ", dropout) : "",
                      gate_order == RnnGateOrder::kIfog ? " gates ifog" : "");
}

RnnWeightOffsets RnnLayerWeights(const RnnDescriptor& rnn, int64_t layer, int direction) {
  const int64_t gh = rnn.gates() * rnn.hidden_size;
  const int64_t biases = rnn.bias == RnnBias::kDouble ? 2 : rnn.bias == RnnBias::kInputOnly ? 1 : 0;
  auto block = [&](int64_t l) {  // one direction's elements in layer l
    return gh * (rnn.LayerInputSize(l) + rnn.hidden_size + biases);
  };
  int64_t at = 0;
  for (int64_t l = 0; l < layer; ++l) at += rnn.directions() * block(l);
  at += direction * block(layer);
  RnnWeightOffsets o;
  o.w_ih = at;
  o.w_hh = o.w_ih + gh * rnn.LayerInputSize(layer);
  const int64_t after = o.w_hh + gh * rnn.hidden_size;
  if (biases >= 1) o.b_ih = after;
  if (biases == 2) o.b_hh = after + gh;
  return o;
}

int64_t RnnWeightCount(const RnnDescriptor& rnn) {
  return RnnLayerWeights(rnn, rnn.layers, 0).w_ih;
}

int64_t RnnStateCount(const RnnDescriptor& rnn, int64_t batch) {
  return rnn.layers * rnn.directions() * batch * rnn.hidden_size;
}

absl::StatusOr<RnnSequences> RnnSequences::Create(RnnLayout layout, int64_t max_length,
                                                  int64_t batch, int64_t features,
                                                  std::vector<int32_t> lengths) {
  const char* where = "RNN sequences";
  if (layout != RnnLayout::kSequenceMajor && layout != RnnLayout::kBatchMajor) {
    return Invalid(where, absl::StrCat("unknown layout ", static_cast<int>(layout)));
  }
  if (max_length < 1 || max_length > kMaxSize) {
    return Invalid(where, absl::StrCat("max_length is ", max_length, " (must be 1..2^30)"));
  }
  if (batch < 1 || batch > kMaxSize) {
    return Invalid(where, absl::StrCat("batch is ", batch, " (must be 1..2^30)"));
  }
  if (features < 1 || features > kMaxSize) {
    return Invalid(where, absl::StrCat("features is ", features, " (must be 1..2^30)"));
  }
  if (static_cast<double>(max_length) * batch * features > static_cast<double>(kMaxSize) * 64) {
    return Invalid(where, absl::StrCat(max_length, " x ", batch, " x ", features,
                                       " elements are more than 2^36"));
  }
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != batch) {
    return Invalid(where, absl::StrCat(lengths.size(), " lengths given for a batch of ", batch));
  }
  for (size_t n = 0; n < lengths.size(); ++n) {
    if (lengths[n] < 0 || lengths[n] > max_length) {
      return Invalid(where, absl::StrCat("length of sequence ", n, " is ", lengths[n],
                                         " (must be 0..", max_length, ")"));
    }
  }
  RnnSequences s;
  s.layout = layout;
  s.max_length = max_length;
  s.batch = batch;
  s.features = features;
  s.lengths = std::move(lengths);
  return s;
}

std::string RnnSequences::ToString() const {
  return absl::StrCat(layout == RnnLayout::kSequenceMajor ? "[T " : "[N ",
                      layout == RnnLayout::kSequenceMajor ? max_length : batch,
                      layout == RnnLayout::kSequenceMajor ? ", N " : ", T ",
                      layout == RnnLayout::kSequenceMajor ? batch : max_length, ", ", features, "]",
                      lengths.empty() ? "" : " ragged");
}

absl::Status CheckRnnCall(const RnnDescriptor& rnn, const RnnSequences& x, const RnnSequences& y,
                          bool has_cont, const char* where) {
  if (rnn.gate_order != RnnGateOrder::kIfgo &&
      (rnn.gate_order != RnnGateOrder::kIfog || rnn.cell != RnnCell::kLstm)) {
    return Invalid(where, absl::StrCat("gate order ", static_cast<int>(rnn.gate_order), " for ",
                                       rnn.ToString(), " (i f o g is an LSTM order)"));
  }
  if (x.features != rnn.input_size) {
    return Invalid(where, absl::StrCat("x ", x.ToString(), " has ", x.features,
                                       " features; the RNN's input_size is ", rnn.input_size));
  }
  const int64_t out = rnn.directions() * rnn.hidden_size;
  if (y.features != out) {
    return Invalid(where, absl::StrCat("y ", y.ToString(), " has ", y.features, " features; ",
                                       rnn.ToString(), " writes ", out));
  }
  if (x.layout != y.layout || x.max_length != y.max_length || x.batch != y.batch) {
    return Invalid(where, absl::StrCat("x ", x.ToString(), " and y ", y.ToString(),
                                       " differ in layout, length or batch"));
  }
  for (int64_t n = 0; n < x.batch; ++n) {
    if (x.length(n) != y.length(n)) {
      return Invalid(where, absl::StrCat("sequence ", n, " has length ", x.length(n), " in x and ",
                                         y.length(n), " in y"));
    }
  }
  if (has_cont && rnn.bidirectional) {
    return Invalid(where, "cont markers are for one direction (a bidirectional RNN takes lengths)");
  }
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
