// Devices: where buffers live and kernels run. The host device serves the reference and CPU
// backends; the CUDA device owns a stream and a cuBLAS handle. Every failure is a Status.
#ifndef KILN_ENGINE_RUNTIME_DEVICE_H_
#define KILN_ENGINE_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

enum class DeviceKind { kHost, kCuda };

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "host (2 threads)", "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
  virtual std::string Describe() const = 0;
  // 256-byte aligned; ResourceExhausted when the device is out of memory.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Fill(void* dst, uint8_t byte, size_t bytes) = 0;
  // Waits for every queued operation; returns the first asynchronous error.
  virtual absl::Status Synchronize() = 0;
  virtual void* stream() const { return nullptr; }
  virtual void* blas_handle() const { return nullptr; }
};

std::unique_ptr<Device> CreateHostDevice();

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;
  int64_t total_memory = 0;
  int multiprocessors = 0;
};

// The result of looking for CUDA: any error from the runtime means "no usable GPU", with the
// runtime's message kept so the program can say why it fell back to the CPU.
struct CudaProbe {
  bool usable = false;
  std::string reason;  // Why not usable (empty when usable).
  int runtime_version = 0;
  int driver_version = 0;
  std::vector<CudaDeviceInfo> devices;
};

// Queries the CUDA runtime once per call (cheap); never aborts.
CudaProbe ProbeCuda();

// A CUDA device with its own stream and cuBLAS handle; Unavailable when none is usable.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal = 0);

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_DEVICE_H_
