// Caffe's recurrent layers (LSTM, RNN) as Kiln's RNN op (ops/recurrent_params.h).
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_RECURRENT_CONVERTERS_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_RECURRENT_CONVERTERS_H_

#include "absl/status/status.h"
#include "frontends/caffe/layers/layer_builder.h"

namespace kiln {

// LSTM: bottoms x [T, N, ...], cont [T, N] (and h_0, c_0 [1, N, H] with expose_hidden); tops
// h [T, N, H] (and h_T, c_T). Blobs W_xc [4H, I], b_c [4H], W_hc [4H, H], gates i f o g.
absl::Status ConvertLstm(LayerBuilder& b);
// RNN: the same bottoms (h_0 only); h_t = tanh(W_xh x_t + b_h + W_hh cont_t h_{t-1}) and the
// top o_t = tanh(W_ho h_t + b_o). Blobs W_xh, b_h, W_hh, W_ho, b_o.
absl::Status ConvertRnn(LayerBuilder& b);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_RECURRENT_CONVERTERS_H_
