// Devices: where buffers live and kernels run. The host device serves the reference and CPU
// backends; the CUDA device owns a stream and a cuBLAS handle, and can make further streams and
// events to order them. Every failure is a Status.
#ifndef KILN_RUNTIME_DEVICE_H_
#define KILN_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

enum class DeviceKind { kHost, kCuda };

// Markers between enqueued work, for per-step timing: Record(i) enqueues marker i; once the
// device has synchronized, ElapsedMs(i, j) is the time from marker i to marker j.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual absl::Status Record(int point) = 0;
  virtual absl::StatusOr<double> ElapsedMs(int from, int to) = 0;
};

// A timer reading the host clock at each Record (right for the host device, whose work is done
// when the call returns).
std::unique_ptr<DeviceTimer> CreateHostTimer(int points);

// A second queue of work on a device, beside the device's own stream(), for work that should run
// concurrently with it (gradient all-reduces during backward). The two are ordered only through
// DeviceEvents. Destroying it does not wait: the work already enqueued still runs.
class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // The stream as kernels and communicators take it: a cudaStream_t, or null on the host.
  virtual void* handle() const = 0;
};

// A marker in one stream that another stream can be made to wait for, without blocking the host
// (a CUDA event without timing).
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Marks the work enqueued on `stream` so far (a stream handle of the same device; replaces an
  // earlier mark).
  virtual absl::Status Record(void* stream) = 0;
  // Work enqueued on `stream` after this call starts only once the marked work has finished.
  // Before any Record there is nothing to wait for.
  virtual absl::Status MakeStreamWait(void* stream) = 0;
};

// The host's: work on the host is finished when its call returns, so there is nothing to order.
// The stream's handle is null (what Communicator and the host kernels take) and the event's
// calls do nothing.
std::unique_ptr<DeviceStream> CreateHostStream();
std::unique_ptr<DeviceEvent> CreateHostEvent();

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
  // Device memory to device memory, enqueued in order with the device's work.
  virtual absl::Status CopyWithinDevice(void* dst, const void* src, size_t bytes) = 0;
  // Waits for every queued operation; returns the first asynchronous error.
  virtual absl::Status Synchronize() = 0;
  // Makes this device the calling thread's current one (CUDA: cudaSetDevice), so that work a
  // thread enqueues through it lands on it. Call at the entry of anything a thread may do with
  // a device other than the last one it used.
  virtual absl::Status MakeCurrent() { return absl::OkStatus(); }
  virtual void* stream() const { return nullptr; }
  virtual void* blas_handle() const { return nullptr; }

  // Host memory for staging copies: page-locked on CUDA so copies run at full speed and
  // asynchronously; plain memory on the host device.
  virtual absl::StatusOr<void*> AllocateStaging(size_t bytes) { return Allocate(bytes); }
  virtual void FreeStaging(void* ptr) { Free(ptr); }
  // Copies enqueued in order with the device's work; done at the next Synchronize.
  virtual absl::Status CopyToDeviceAsync(void* dst, const void* host_src, size_t bytes) {
    return CopyToDevice(dst, host_src, bytes);
  }
  virtual absl::Status CopyToHostAsync(void* host_dst, const void* src, size_t bytes) {
    return CopyToHost(host_dst, src, bytes);
  }
  // Free device memory in bytes, or -1 where unknown (the host).
  virtual int64_t FreeMemoryBytes() const { return -1; }

  // Recording the work enqueued between BeginCapture and EndCapture as a replayable graph (CUDA
  // graphs): Unimplemented on the host. EndCapture returns an opaque graph for Replay and
  // DestroyGraph; a failed capture leaves the device usable for ordinary work.
  virtual absl::Status BeginCapture() {
    return absl::UnimplementedError("this device cannot capture graphs");
  }
  virtual absl::StatusOr<void*> EndCapture() {
    return absl::UnimplementedError("this device cannot capture graphs");
  }
  virtual absl::Status Replay(void* graph) {
    return absl::UnimplementedError("this device cannot replay graphs");
  }
  virtual void DestroyGraph(void* graph) {}

  virtual absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(int points) {
    return CreateHostTimer(points);
  }

  // Another stream of this device and events to order it against stream() (see DeviceStream).
  // Internal with CUDA's message when the runtime cannot make one.
  virtual absl::StatusOr<std::unique_ptr<DeviceStream>> CreateStream() {
    return CreateHostStream();
  }
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() { return CreateHostEvent(); }
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

// Makes GPU `ordinal` the calling thread's current device; InvalidArgument naming the devices
// there are when it does not exist, Unavailable when CUDA is not usable.
absl::Status SelectCudaDevice(int ordinal);

}  // namespace kiln

#endif  // KILN_RUNTIME_DEVICE_H_
