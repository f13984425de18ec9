// Caffe's Embed layer as Kiln's Embed op (ops/embed_ops.cc).
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_EMBED_CONVERTER_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_EMBED_CONVERTER_H_

#include "absl/status/status.h"
#include "frontends/caffe/layers/layer_builder.h"

namespace kiln {

// Embed: bottom x (indices in [0, input_dim), any shape); top x.dims + [num_output]. Blobs:
// W [input_dim, num_output], then b [num_output] when bias_term (Caffe's default).
absl::Status ConvertEmbed(LayerBuilder& b);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_EMBED_CONVERTER_H_
