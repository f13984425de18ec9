// The one visible list of op families. Each Register*Ops adds its OpDefs to the registry.
#ifndef KILN_OPS_ALL_OPS_H_
#define KILN_OPS_ALL_OPS_H_

#include "absl/status/status.h"
#include "ir/op_registry.h"

namespace kiln {

absl::Status RegisterGraphOps(OpRegistry& registry);          // Parameter, Constant
absl::Status RegisterConvolutionOps(OpRegistry& registry);    // Convolution, Deconvolution
absl::Status RegisterPoolingOps(OpRegistry& registry);        // Pooling
absl::Status RegisterNormalizationOps(OpRegistry& registry);  // LRN, BatchNorm
absl::Status RegisterActivationOps(OpRegistry& registry);     // ReLU, PReLU, Sigmoid, ...
absl::Status RegisterScaleOps(OpRegistry& registry);          // Scale, Bias
absl::Status RegisterSoftmaxOps(OpRegistry& registry);        // Softmax
absl::Status RegisterInnerProductOps(OpRegistry& registry);   // InnerProduct
absl::Status RegisterTensorOps(OpRegistry& registry);     // Concat, Slice, Flatten, Reshape, ...
absl::Status RegisterEltwiseOps(OpRegistry& registry);    // Eltwise
absl::Status RegisterLossOps(OpRegistry& registry);       // SoftmaxWithLoss, Accuracy, ...
absl::Status RegisterRecurrentOps(OpRegistry& registry);  // RNN, RNNGradient
absl::Status RegisterEmbedOps(OpRegistry& registry);      // Embed, EmbedGradient
absl::Status RegisterTileOps(OpRegistry& registry);       // Tile, TileGradient
absl::Status RegisterChannelShuffleOps(OpRegistry& registry);  // ChannelShuffle
absl::Status RegisterReductionOps(OpRegistry& registry);       // Reduction, ReductionGradient
absl::Status RegisterArgMaxOps(OpRegistry& registry);          // ArgMax
absl::Status RegisterLstmUnitOps(OpRegistry& registry);        // LSTMUnit, LSTMUnitGradient
absl::Status RegisterCtcOps(OpRegistry& registry);             // CTCLoss, CTCLossGradient
absl::Status RegisterGradientOps(OpRegistry& registry);        // the backward ops (gradient_ops.cc)

// Registers every family above.
absl::Status RegisterAllOps(OpRegistry& registry);

// A registry holding every op (the common case for tools, tests and examples).
const OpRegistry& DefaultOpRegistry();

}  // namespace kiln

#endif  // KILN_OPS_ALL_OPS_H_
