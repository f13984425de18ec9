// The primitive API's handle, as cuDNN's: bound to one CUDA stream and holding the cuBLAS handle
// the GEMM algorithms use. Not thread-safe: use one handle per host thread.
#ifndef KILN_DNN_CUDA_DNN_HANDLE_H_
#define KILN_DNN_CUDA_DNN_HANDLE_H_

#include <memory>

#include "absl/status/statusor.h"

namespace kiln {
namespace dnn {

class FftPlanCache;

class Handle {
 public:
  // A handle on the current CUDA device and its default stream. FailedPrecondition when no
  // device is usable, Internal when cuBLAS cannot start.
  static absl::StatusOr<std::unique_ptr<Handle>> Create();
  // A handle over a caller's stream and cuBLAS handle, which it does not own (the graph
  // executor's, so one plan step shares them).
  Handle(void* stream, void* cublas, int multiprocessors);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // Every later call enqueues on `stream` (a cudaStream_t; nullptr is the default stream).
  absl::Status SetStream(void* stream);
  void* stream() const { return stream_; }
  // The cublasHandle_t, bound to the same stream.
  void* cublas() const { return cublas_; }
  int multiprocessors() const { return multiprocessors_; }
  // The cuFFT plans of the FFT convolution, made on first use (a cache: workspace-size queries on
  // a const handle may add plans).
  FftPlanCache& fft_plans() const;

 private:
  Handle();
  void* stream_ = nullptr;
  void* cublas_ = nullptr;
  int multiprocessors_ = 1;
  bool owns_cublas_ = true;
  mutable std::unique_ptr<FftPlanCache> fft_plans_;
};

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_DNN_HANDLE_H_
