// Registration of the graph engine's CUDA kernels, one function per op family (one file each in
// this folder). Compiled in every build, CI included; they only run where a GPU is found.
#ifndef KILN_KERNELS_CUDA_GRAPH_KERNELS_H_
#define KILN_KERNELS_CUDA_GRAPH_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Convolution and Deconvolution (on backward data), with algorithm choice, and the
// convolution's backward data and filter.
absl::Status RegisterCudaConvolutionKernels(KernelRegistry& registry);
// InnerProduct on cuBLAS, any axis, and its two backward products.
absl::Status RegisterCudaInnerProductKernels(KernelRegistry& registry);
// ReLU, Sigmoid, TanH, ELU, ClippedReLU, Power, AbsVal, PReLU, and their gradients.
absl::Status RegisterCudaActivationKernels(KernelRegistry& registry);
// Dropout and DropoutGradient.
absl::Status RegisterCudaDropoutKernels(KernelRegistry& registry);
// Pooling and its gradient.
absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry);
// LRN and LRNGradient.
absl::Status RegisterCudaLrnKernels(KernelRegistry& registry);
// BatchNorm, AffineBatchNorm (training BatchNorm + Scale, fused), BatchNormGradient and
// AffineBatchNormGradient.
absl::Status RegisterCudaBatchNormKernels(KernelRegistry& registry);
// Scale, Bias; BiasGradient, ScaleParamGradient.
absl::Status RegisterCudaScaleKernels(KernelRegistry& registry);
// Softmax and SoftmaxGradient.
absl::Status RegisterCudaSoftmaxKernels(KernelRegistry& registry);
// Concat, Slice, Split, Crop, Flatten, Reshape, Convert; CropGradient.
absl::Status RegisterCudaTensorKernels(KernelRegistry& registry);
// Eltwise and EltwiseMaxGradient.
absl::Status RegisterCudaEltwiseKernels(KernelRegistry& registry);
// SoftmaxWithLoss, EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, Accuracy, and the
// four losses' gradients.
absl::Status RegisterCudaLossKernels(KernelRegistry& registry);

// Reduction and ReductionGradient (sum, asum, sumsq, mean over the trailing axes).
absl::Status RegisterCudaReductionKernels(KernelRegistry& registry);
// Tile and TileGradient (broadcast add, and the sum over the copies).
absl::Status RegisterCudaTileKernels(KernelRegistry& registry);
absl::Status RegisterCudaChannelShuffleKernels(KernelRegistry& registry);
// Embed and EmbedGradient (lookup table, deterministic row-scan backward).
absl::Status RegisterCudaEmbedKernels(KernelRegistry& registry);
// CTCLoss and CTCLossGradient over the CTC primitive's kernels.
absl::Status RegisterCudaCtcKernels(KernelRegistry& registry);
// RNN and RNNGradient (one recurrent layer) over the GPU RNN primitive.
absl::Status RegisterCudaRecurrentKernels(KernelRegistry& registry);
// ArgMax (top-k per row, indices or values, f32 out).
absl::Status RegisterCudaArgMaxKernels(KernelRegistry& registry);
// LSTMUnit and LSTMUnitGradient (one fused element-wise kernel each).
absl::Status RegisterCudaLstmUnitKernels(KernelRegistry& registry);

// All of the above.
absl::Status RegisterCudaKernels(KernelRegistry& registry);

}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_GRAPH_KERNELS_H_
