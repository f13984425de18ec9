// The CUDA device and CUDA detection, on the CUDA runtime API (linked statically) and cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/runtime/device.h"

namespace kiln {

namespace {

absl::Status CudaError(cudaError_t e, const char* call, int line) {
  return absl::InternalError(absl::StrCat(call, " failed at engine/runtime/cuda_device.cc:", line,
                                          ": ", cudaGetErrorString(e)));
}

#define KILN_CUDA_CALL(call)                                                \
  do {                                                                      \
    const cudaError_t kiln_e_ = (call);                                     \
    if (kiln_e_ != cudaSuccess) return CudaError(kiln_e_, #call, __LINE__); \
  } while (0)

class CudaDevice : public Device {
 public:
  CudaDevice(CudaDeviceInfo info, cudaStream_t stream, cublasHandle_t blas)
      : info_(std::move(info)), stream_(stream), blas_(blas) {}
  ~CudaDevice() override {
    cudaSetDevice(info_.ordinal);
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string Describe() const override {
    return absl::StrFormat("cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB)", info_.ordinal, info_.name,
                           info_.major, info_.minor, info_.multiprocessors,
                           info_.total_memory / 1073741824.0);
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // Clear the sticky-free error so later calls work.
      return absl::ResourceExhaustedError(
          absl::StrCat("cuda:", info_.ordinal, ": cannot allocate ", bytes, " bytes"));
    }
    if (e != cudaSuccess) return CudaError(e, "cudaMalloc", __LINE__);
    return p;
  }
  void Free(void* ptr) override { cudaFree(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    KILN_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    KILN_CUDA_CALL(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    KILN_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    KILN_CUDA_CALL(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status Fill(void* dst, uint8_t byte, size_t bytes) override {
    KILN_CUDA_CALL(cudaMemsetAsync(dst, byte, bytes, stream_));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    KILN_CUDA_CALL(cudaStreamSynchronize(stream_));
    KILN_CUDA_CALL(cudaGetLastError());
    return absl::OkStatus();
  }
  void* stream() const override { return stream_; }
  void* blas_handle() const override { return blas_; }

 private:
  CudaDeviceInfo info_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
};

}  // namespace

CudaProbe ProbeCuda() {
  CudaProbe probe;
  cudaRuntimeGetVersion(&probe.runtime_version);
  cudaDriverGetVersion(&probe.driver_version);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    probe.reason = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(e));
    cudaGetLastError();
    return probe;
  }
  if (count == 0) {
    probe.reason = "no CUDA device found";
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, i);
    if (e != cudaSuccess) {
      probe.reason = absl::StrCat("cudaGetDeviceProperties(", i, "): ", cudaGetErrorString(e));
      return probe;
    }
    probe.devices.push_back({i, prop.name, prop.major, prop.minor,
                             static_cast<int64_t>(prop.totalGlobalMem), prop.multiProcessorCount});
  }
  // Creating the context is where a broken driver or a wrong architecture shows up.
  e = cudaSetDevice(0);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) {
    probe.reason = absl::StrCat("creating a CUDA context: ", cudaGetErrorString(e));
    cudaGetLastError();
    return probe;
  }
  probe.usable = true;
  return probe;
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
  CudaProbe probe = ProbeCuda();
  if (!probe.usable) return absl::UnavailableError(probe.reason);
  if (ordinal < 0 || ordinal >= static_cast<int>(probe.devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda:", ordinal, " does not exist (", probe.devices.size(), " devices)"));
  }
  KILN_CUDA_CALL(cudaSetDevice(ordinal));
  cudaStream_t stream = nullptr;
  KILN_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  const cublasStatus_t s = cublasCreate(&blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return absl::InternalError(absl::StrCat("cublasCreate: ", cublasGetStatusString(s)));
  }
  return std::unique_ptr<Device>(new CudaDevice(probe.devices[ordinal], stream, blas));
}

}  // namespace kiln
