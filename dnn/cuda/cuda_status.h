// CUDA errors as absl::Status: Internal naming the call, file:line and CUDA's message.
#ifndef KILN_DNN_CUDA_CUDA_STATUS_H_
#define KILN_DNN_CUDA_CUDA_STATUS_H_

#include "absl/status/status.h"

namespace kiln {

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

#endif  // KILN_DNN_CUDA_CUDA_STATUS_H_
