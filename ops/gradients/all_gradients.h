// The gradient builders of every differentiable op, one file per op family, attached to the
// registry's OpDefs by name (OpRegistry::SetGradient).
#ifndef KILN_OPS_GRADIENTS_ALL_GRADIENTS_H_
#define KILN_OPS_GRADIENTS_ALL_GRADIENTS_H_

#include "absl/status/status.h"
#include "ir/op_registry.h"

namespace kiln {

absl::Status RegisterNnGradients(OpRegistry& registry);         // conv, IP, pooling, LRN, BN, ...
absl::Status RegisterPointwiseGradients(OpRegistry& registry);  // activations, Dropout, Eltwise
absl::Status RegisterTensorGradients(OpRegistry& registry);     // Concat, Slice, Split, views
absl::Status RegisterLossGradients(OpRegistry& registry);       // the four losses
absl::Status RegisterRecurrentGradients(OpRegistry& registry);  // RNN, LSTMUnit

// All of the above. Every op marked differentiable must end up with a builder.
absl::Status RegisterAllGradients(OpRegistry& registry);

}  // namespace kiln

#endif  // KILN_OPS_GRADIENTS_ALL_GRADIENTS_H_
