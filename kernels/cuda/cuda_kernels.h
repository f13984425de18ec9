// Registration of the CUDA kernels (f32, dense NCHW). Compiled in every build, CI included;
// they only run where a GPU is found.
#ifndef KILN_KERNELS_CUDA_CUDA_KERNELS_H_
#define KILN_KERNELS_CUDA_CUDA_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

absl::Status RegisterCudaKernels(KernelRegistry& registry);

// Internal naming the CUDA call, file:line and CUDA's message when `error` (a cudaError_t) is
// not cudaSuccess.
absl::Status CudaStatus(int error, const char* call, const char* file, int line);

#define KILN_CUDA_RETURN_IF_ERROR(call)                                       \
  do {                                                                        \
    const int kiln_cuda_error_ = static_cast<int>(call);                      \
    if (kiln_cuda_error_ != 0)                                                \
      return ::kiln::CudaStatus(kiln_cuda_error_, #call, __FILE__, __LINE__); \
  } while (0)

}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CUDA_KERNELS_H_
