// ShuffleChannel, the channel shuffle of ShuffleNet's Caffe forks (farmingyard/ShuffleNet's
// layer and field number), as Kiln's ChannelShuffle op (ops/channel_shuffle_ops.cc).
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_SHUFFLE_CHANNEL_CONVERTER_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_SHUFFLE_CHANNEL_CONVERTER_H_

#include "absl/status/status.h"
#include "frontends/caffe/layers/layer_builder.h"

namespace kiln {

// ShuffleChannel: bottom x [N, C, ...], shuffle_channel_param.group (default 1) dividing C; top
// of x's shape. No blobs.
absl::Status ConvertShuffleChannel(LayerBuilder& b);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_SHUFFLE_CHANNEL_CONVERTER_H_
