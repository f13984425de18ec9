// Caffe's ArgMax and LSTMUnit layers as Kiln's ArgMax and LSTMUnit ops (ops/argmax_ops.cc,
// ops/lstm_unit_ops.cc). Neither has parameter blobs.
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_SEQUENCE_UNIT_CONVERTERS_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_SEQUENCE_UNIT_CONVERTERS_H_

#include "absl/status/status.h"
#include "frontends/caffe/layers/layer_builder.h"

namespace kiln {

// ArgMax: one bottom, one top; argmax_param's top_k, out_max_val and (optional) axis as the
// op's attributes, with Caffe's top shapes.
absl::Status ConvertArgMax(LayerBuilder& b);
// LSTMUnit: bottoms c_prev [1, N, D], x [1, N, 4D] (gates i, f, o, g), cont [1, N]; tops c and
// h [1, N, D].
absl::Status ConvertLstmUnit(LayerBuilder& b);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_SEQUENCE_UNIT_CONVERTERS_H_
