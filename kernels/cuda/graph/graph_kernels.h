// Registration of the graph engine's CUDA kernels, one function per op family (one file each in
// this folder). Compiled in every build, CI included; they only run where a GPU is found.
#ifndef KILN_KERNELS_CUDA_GRAPH_GRAPH_KERNELS_H_
#define KILN_KERNELS_CUDA_GRAPH_GRAPH_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Convolution and Deconvolution (on backward data), with algorithm choice.
absl::Status RegisterCudaConvolutionKernels(KernelRegistry& registry);
// InnerProduct on cuBLAS, any axis.
absl::Status RegisterCudaInnerProductKernels(KernelRegistry& registry);
// ReLU, Sigmoid, TanH, ELU, ClippedReLU, Power, AbsVal, PReLU, Dropout.
absl::Status RegisterCudaActivationKernels(KernelRegistry& registry);
// Pooling and LRN.
absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry);
// BatchNorm, Scale, Bias.
absl::Status RegisterCudaNormalizationKernels(KernelRegistry& registry);
// Softmax.
absl::Status RegisterCudaSoftmaxKernels(KernelRegistry& registry);
// Concat, Slice, Split, Crop, Flatten, Reshape, Convert.
absl::Status RegisterCudaTensorKernels(KernelRegistry& registry);
// Eltwise.
absl::Status RegisterCudaEltwiseKernels(KernelRegistry& registry);
// SoftmaxWithLoss, EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, Accuracy.
absl::Status RegisterCudaLossKernels(KernelRegistry& registry);

// All of the above.
absl::Status RegisterCudaKernels(KernelRegistry& registry);

}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_GRAPH_GRAPH_KERNELS_H_
