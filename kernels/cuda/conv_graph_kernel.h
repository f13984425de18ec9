// The graph engine's CUDA Convolution kernel: the node's shapes become a ConvProblem and the
// primitive API's heuristic (GetConvolutionAlgorithms) picks the algorithm at plan time, within
// a workspace cap; the bias, when present, is added after the convolution.
#ifndef KILN_KERNELS_CUDA_CONV_GRAPH_KERNEL_H_
#define KILN_KERNELS_CUDA_CONV_GRAPH_KERNEL_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Registers Convolution (f32, dense NCHW, 2-d and 3-d) as "cuda.Convolution...dnn_heuristic".
absl::Status RegisterCudaConvolutionKernel(KernelRegistry& registry);

}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CONV_GRAPH_KERNEL_H_
