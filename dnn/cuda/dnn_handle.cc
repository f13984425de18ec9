#include "dnn/cuda/dnn_handle.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/conv/fft_plans.h"

namespace kiln {
namespace dnn {

Handle::Handle() = default;

Handle::Handle(void* stream, void* cublas, int multiprocessors)
    : stream_(stream), cublas_(cublas), multiprocessors_(multiprocessors), owns_cublas_(false) {}

absl::StatusOr<std::unique_ptr<Handle>> Handle::Create() {
  int device = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return absl::FailedPreconditionError("dnn::Handle: no usable CUDA device");
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::unique_ptr<Handle> h(new Handle());
  KILN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&h->multiprocessors_, cudaDevAttrMultiProcessorCount, device));
  cublasHandle_t cublas = nullptr;
  const cublasStatus_t s = cublasCreate(&cublas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("dnn::Handle: cublasCreate failed: ", cublasGetStatusString(s)));
  }
  h->cublas_ = cublas;
  return h;
}

Handle::~Handle() {
  if (owns_cublas_ && cublas_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
}

FftPlanCache& Handle::fft_plans() const {
  if (fft_plans_ == nullptr) fft_plans_ = std::make_unique<FftPlanCache>();
  return *fft_plans_;
}

absl::Status Handle::SetStream(void* stream) {
  const cublasStatus_t s =
      cublasSetStream(static_cast<cublasHandle_t>(cublas_), static_cast<cudaStream_t>(stream));
  if (s != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("dnn::Handle::SetStream: cublasSetStream failed: ", cublasGetStatusString(s)));
  }
  stream_ = stream;
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
