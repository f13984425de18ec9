// The frame every reference kernel shares: inputs of any strides and any float dtype are
// gathered into dense f32 buffers in the workspace, the op's math runs on those, and the dense
// results are scattered back into the (possibly strided, f16/bf16) outputs. Each op's formula is
// thus written once, on dense row-major f32 data, and stays readable.
#ifndef KILN_KERNELS_REFERENCE_REFERENCE_KERNEL_H_
#define KILN_KERNELS_REFERENCE_REFERENCE_KERNEL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/kernel.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Dense row-major f32 operands of one reference computation.
struct DenseArgs {
  std::vector<const float*> in;
  std::vector<TensorType> in_types;  // Dense f32 types with the inputs' dims.
  std::vector<float*> out;
  std::vector<TensorType> out_types;
};

using DenseComputeFn = std::function<absl::Status(const Node& node, const DenseArgs& args)>;

// Registers "reference.<op>.any.any.<algorithm>" running `compute`.
absl::Status RegisterReference(KernelRegistry& registry, const std::string& op,
                               DenseComputeFn compute, const std::string& algorithm = "naive");

// One registration function per op family, forward and backward ops together
// (kernels/reference/<family>.cc).
absl::Status RegisterReferenceActivation(KernelRegistry& registry);
absl::Status RegisterReferenceBatchNorm(KernelRegistry& registry);
absl::Status RegisterReferenceConvolution(KernelRegistry& registry);
absl::Status RegisterReferenceCtc(KernelRegistry& registry);  // CTCLoss, CTCLossGradient
absl::Status RegisterReferenceDropout(KernelRegistry& registry);
absl::Status RegisterReferenceEltwise(KernelRegistry& registry);
absl::Status RegisterReferenceEmbed(KernelRegistry& registry);           // Embed, EmbedGradient
absl::Status RegisterReferenceTile(KernelRegistry& registry);            // Tile, TileGradient
absl::Status RegisterReferenceChannelShuffle(KernelRegistry& registry);  // ChannelShuffle
absl::Status RegisterReferenceReduction(KernelRegistry& registry);       // and ReductionGradient
absl::Status RegisterReferenceArgMax(KernelRegistry& registry);
absl::Status RegisterReferenceLstmUnit(KernelRegistry& registry);  // and LSTMUnitGradient
absl::Status RegisterReferenceInnerProduct(KernelRegistry& registry);
absl::Status RegisterReferenceLoss(KernelRegistry& registry);
absl::Status RegisterReferenceLrn(KernelRegistry& registry);
absl::Status RegisterReferencePooling(KernelRegistry& registry);
absl::Status RegisterReferenceRecurrent(KernelRegistry& registry);  // RNN, RNNGradient
// Scale and Bias, and their parameter gradients.
absl::Status RegisterReferenceScale(KernelRegistry& registry);
absl::Status RegisterReferenceSoftmax(KernelRegistry& registry);
absl::Status RegisterReferenceTensor(KernelRegistry& registry);

// All of the above.
absl::Status RegisterReferenceKernels(KernelRegistry& registry);

}  // namespace kiln

#endif  // KILN_KERNELS_REFERENCE_REFERENCE_KERNEL_H_
