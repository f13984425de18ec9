// The identity of every op Kiln defines, as a small enum: passes, kernels, the compiler and
// training test what a node is by kind (a compare of two integers, or a switch the compiler
// checks) instead of comparing op names as strings. The names are the OpDefs' (ops/); the
// registry gives each OpDef its kind when it is registered. An op registered under a name not
// listed here (an embedder's own op) has kind kCustom and is told apart by its name.
#ifndef KILN_IR_OP_KIND_H_
#define KILN_IR_OP_KIND_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kiln {

// X(name) for every op of ops/, in alphabetical order. A new op adds its line here.
#define KILN_OP_KINDS(X)             \
  X(AbsVal)                          \
  X(Accuracy)                        \
  X(ActivationGradient)              \
  X(AffineBatchNorm)                 \
  X(AffineBatchNormGradient)         \
  X(ArgMax)                          \
  X(BatchNorm)                       \
  X(BatchNormGradient)               \
  X(Bias)                            \
  X(BiasGradient)                    \
  X(CTCLoss)                         \
  X(CTCLossGradient)                 \
  X(ChannelShuffle)                  \
  X(ClippedReLU)                     \
  X(Concat)                          \
  X(Constant)                        \
  X(ContrastiveLoss)                 \
  X(ContrastiveLossGradient)         \
  X(Convert)                         \
  X(Convolution)                     \
  X(ConvolutionBackwardData)         \
  X(ConvolutionBackwardFilter)       \
  X(Crop)                            \
  X(CropGradient)                    \
  X(Deconvolution)                   \
  X(Dropout)                         \
  X(DropoutGradient)                 \
  X(ELU)                             \
  X(Eltwise)                         \
  X(Embed)                           \
  X(EmbedGradient)                   \
  X(EltwiseMaxGradient)              \
  X(EuclideanLoss)                   \
  X(EuclideanLossGradient)           \
  X(Flatten)                         \
  X(InnerProduct)                    \
  X(InnerProductBackwardData)        \
  X(InnerProductBackwardFilter)      \
  X(LRN)                             \
  X(LRNGradient)                     \
  X(LSTMUnit)                        \
  X(LSTMUnitGradient)                \
  X(PReLU)                           \
  X(PReLUGradient)                   \
  X(Parameter)                       \
  X(Pooling)                         \
  X(PoolingGradient)                 \
  X(Power)                           \
  X(RNN)                             \
  X(RNNGradient)                     \
  X(ReLU)                            \
  X(Reduction)                       \
  X(ReductionGradient)               \
  X(Reshape)                         \
  X(Scale)                           \
  X(ScaleParamGradient)              \
  X(Sigmoid)                         \
  X(SigmoidCrossEntropyLoss)         \
  X(SigmoidCrossEntropyLossGradient) \
  X(Slice)                           \
  X(Softmax)                         \
  X(SoftmaxGradient)                 \
  X(SoftmaxWithLoss)                 \
  X(SoftmaxWithLossGradient)         \
  X(Split)                           \
  X(TanH)                            \
  X(Tile)                            \
  X(TileGradient)

enum class OpKind : uint16_t {
  kCustom = 0,
#define KILN_OP_KIND_ENUMERATOR(name) k##name,
  KILN_OP_KINDS(KILN_OP_KIND_ENUMERATOR)
#undef KILN_OP_KIND_ENUMERATOR
};

// The kind of the op named `name`; kCustom for a name Kiln does not define.
OpKind OpKindFromName(absl::string_view name);

// The op name of `kind` ("Convolution"); "custom" for kCustom.
absl::string_view OpKindName(OpKind kind);

}  // namespace kiln

#endif  // KILN_IR_OP_KIND_H_
