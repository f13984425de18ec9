// The CUDA device and CUDA detection, on the CUDA runtime API (linked statically) and cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runtime/device.h"

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

class CudaTimer : public DeviceTimer {
 public:
  CudaTimer(std::vector<cudaEvent_t> events, cudaStream_t stream)
      : events_(std::move(events)), stream_(stream) {}
  ~CudaTimer() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  absl::Status Record(int point) override {
    if (point < 0 || point >= static_cast<int>(events_.size())) {
      return absl::OutOfRangeError(absl::StrCat("timer point ", point, " of ", events_.size()));
    }
    KILN_CUDA_CALL(cudaEventRecord(events_[point], stream_));
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedMs(int from, int to) override {
    if (from < 0 || to < 0 || from >= static_cast<int>(events_.size()) ||
        to >= static_cast<int>(events_.size())) {
      return absl::OutOfRangeError("timer point out of range");
    }
    float ms = 0;
    KILN_CUDA_CALL(cudaEventElapsedTime(&ms, events_[from], events_[to]));
    return static_cast<double>(ms);
  }

 private:
  std::vector<cudaEvent_t> events_;
  cudaStream_t stream_;
};

class CudaStream : public DeviceStream {
 public:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  // cudaStreamDestroy returns at once; work still queued on the stream runs to its end first.
  ~CudaStream() override { cudaStreamDestroy(stream_); }
  void* handle() const override { return stream_; }

 private:
  cudaStream_t stream_;
};

class CudaEvent : public DeviceEvent {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  absl::Status Record(void* stream) override {
    KILN_CUDA_CALL(cudaEventRecord(event_, static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  }
  absl::Status MakeStreamWait(void* stream) override {
    KILN_CUDA_CALL(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event_, 0));
    return absl::OkStatus();
  }

 private:
  cudaEvent_t event_;
};

// cuBLAS gets a workspace of its own from us, so it never allocates while a CUDA graph is being
// captured (allocation is not allowed then).
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

class CudaDevice : public Device {
 public:
  CudaDevice(CudaDeviceInfo info, cudaStream_t stream, cublasHandle_t blas, void* blas_workspace)
      : info_(std::move(info)), stream_(stream), blas_(blas), blas_workspace_(blas_workspace) {}
  ~CudaDevice() override {
    cudaSetDevice(info_.ordinal);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (blas_workspace_ != nullptr) cudaFree(blas_workspace_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string Describe() const override {
    return absl::StrFormat("cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB)", info_.ordinal, info_.name,
                           info_.major, info_.minor, info_.multiprocessors,
                           info_.total_memory / 1073741824.0);
  }
  absl::Status MakeCurrent() override {
    KILN_CUDA_CALL(cudaSetDevice(info_.ordinal));
    return absl::OkStatus();
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    KILN_RETURN_IF_ERROR(MakeCurrent());
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
  void Free(void* ptr) override {
    cudaSetDevice(info_.ordinal);
    cudaFree(ptr);
  }
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
  absl::Status CopyWithinDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0)
      KILN_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    KILN_CUDA_CALL(cudaStreamSynchronize(stream_));
    KILN_CUDA_CALL(cudaGetLastError());
    return absl::OkStatus();
  }
  void* stream() const override { return stream_; }
  void* blas_handle() const override { return blas_; }

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes == 0 ? 256 : bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", bytes, " bytes of page-locked host memory: ", cudaGetErrorString(e)));
    }
    return p;
  }
  void FreeStaging(void* ptr) override { cudaFreeHost(ptr); }
  absl::Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0)
      KILN_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHostAsync(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0)
      KILN_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  }
  int64_t FreeMemoryBytes() const override {
    if (cudaSetDevice(info_.ordinal) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<int64_t>(free_bytes);
  }
  absl::Status BeginCapture() override {
    // Thread-local mode: other threads' contexts keep working while this one records.
    KILN_CUDA_CALL(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    return absl::OkStatus();
  }
  absl::StatusOr<void*> EndCapture() override {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    if (e != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();
      return CudaError(e, "cudaStreamEndCapture", __LINE__);
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return CudaError(e, "cudaGraphInstantiate", __LINE__);
    }
    return static_cast<void*>(exec);
  }
  absl::Status Replay(void* graph) override {
    KILN_CUDA_CALL(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_));
    return absl::OkStatus();
  }
  void DestroyGraph(void* graph) override {
    if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }
  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(int points) override {
    std::vector<cudaEvent_t> events(points, nullptr);
    for (int i = 0; i < points; ++i) {
      const cudaError_t e = cudaEventCreate(&events[i]);
      if (e != cudaSuccess) {
        for (int j = 0; j < i; ++j) cudaEventDestroy(events[j]);
        return CudaError(e, "cudaEventCreate", __LINE__);
      }
    }
    return std::unique_ptr<DeviceTimer>(new CudaTimer(std::move(events), stream_));
  }
  absl::StatusOr<std::unique_ptr<DeviceStream>> CreateStream() override {
    KILN_CUDA_CALL(cudaSetDevice(info_.ordinal));
    cudaStream_t stream = nullptr;
    // Non-blocking like the device's own stream: neither waits for the legacy default stream.
    KILN_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return std::unique_ptr<DeviceStream>(new CudaStream(stream));
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() override {
    KILN_CUDA_CALL(cudaSetDevice(info_.ordinal));
    cudaEvent_t event = nullptr;
    // Ordering only: an event without timing is cheaper to record and to wait for.
    KILN_CUDA_CALL(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return std::unique_ptr<DeviceEvent>(new CudaEvent(event));
  }

 private:
  CudaDeviceInfo info_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
  void* blas_workspace_;
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
  // Creating the context is where a broken driver or a wrong architecture shows up: on the
  // calling thread's current device, which stays current (a probe must not move a thread that
  // works on GPU 1 back to GPU 0).
  int current = 0;
  e = cudaGetDevice(&current);
  if (e == cudaSuccess) e = cudaSetDevice(current);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) {
    probe.reason = absl::StrCat("creating a CUDA context: ", cudaGetErrorString(e));
    cudaGetLastError();
    return probe;
  }
  probe.usable = true;
  return probe;
}

absl::Status SelectCudaDevice(int ordinal) {
  CudaProbe probe = ProbeCuda();
  if (!probe.usable) return absl::UnavailableError(probe.reason);
  if (ordinal < 0 || ordinal >= static_cast<int>(probe.devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda:", ordinal, " does not exist (this machine has ", probe.devices.size(),
                     " CUDA device", probe.devices.size() == 1 ? "" : "s",
                     ": cuda:0 to cuda:", probe.devices.size() - 1, ")"));
  }
  KILN_CUDA_CALL(cudaSetDevice(ordinal));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
  KILN_RETURN_IF_ERROR(SelectCudaDevice(ordinal));
  CudaProbe probe = ProbeCuda();
  cudaStream_t stream = nullptr;
  KILN_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  void* blas_workspace = nullptr;
  cublasStatus_t s = cublasCreate(&blas);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(blas, stream);
  if (s == CUBLAS_STATUS_SUCCESS) {
    const cudaError_t e = cudaMalloc(&blas_workspace, kCublasWorkspaceBytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      cublasDestroy(blas);
      cudaStreamDestroy(stream);
      return absl::ResourceExhaustedError(
          absl::StrCat("cuda:", ordinal, ": cannot allocate cuBLAS's workspace of ",
                       kCublasWorkspaceBytes, " bytes: ", cudaGetErrorString(e)));
    }
    s = cublasSetWorkspace(blas, blas_workspace, kCublasWorkspaceBytes);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    if (blas != nullptr) cublasDestroy(blas);
    if (blas_workspace != nullptr) cudaFree(blas_workspace);
    cudaStreamDestroy(stream);
    return absl::InternalError(absl::StrCat("cuBLAS set-up: ", cublasGetStatusString(s)));
  }
  return std::unique_ptr<Device>(
      new CudaDevice(probe.devices[ordinal], stream, blas, blas_workspace));
}

}  // namespace kiln
