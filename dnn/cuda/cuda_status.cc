#include "dnn/cuda/cuda_status.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace kiln {

absl::Status CudaStatus(int error, const char* call, const char* file, int line) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed at ", file, ":", line, ": ",
                                          cudaGetErrorString(static_cast<cudaError_t>(error))));
}

}  // namespace kiln
