// Registration of the CUDA kernels (f32, dense NCHW). Compiled in every build, CI included;
// they only run where a GPU is found.
#ifndef KILN_KERNELS_CUDA_CUDA_KERNELS_H_
#define KILN_KERNELS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

absl::Status RegisterCudaKernels(KernelRegistry& registry);

}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CUDA_KERNELS_H_
