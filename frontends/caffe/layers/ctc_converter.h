// The CTCLoss layer (a Kiln extension of Caffe's format) as Kiln's CTCLoss op (ops/ctc_ops.cc).
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_CTC_CONVERTER_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_CTC_CONVERTER_H_

#include "absl/status/status.h"
#include "frontends/caffe/layers/layer_builder.h"

namespace kiln {

// CTCLoss: bottoms activations [T, N, C] (unnormalised scores), labels [N, L] (padded),
// input lengths [N] and label lengths [N]; one top, the scalar loss (loss weight 1 by default,
// as Caffe's other losses). Options in ctc_loss_param: blank_index, reduction ("mean" or "sum")
// and zero_infinity. No blobs.
absl::Status ConvertCtcLoss(LayerBuilder& b);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_CTC_CONVERTER_H_
