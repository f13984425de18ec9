#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device.h"

namespace kiln {

namespace {

class HostDevice : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::kHost; }
  std::string Describe() const override {
    return absl::StrCat("host (", std::thread::hardware_concurrency(), " threads)");
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    const size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host: cannot allocate ", bytes, " bytes"));
    }
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyWithinDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Fill(void* dst, uint8_t byte, size_t bytes) override {
    if (bytes > 0) std::memset(dst, byte, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

class HostTimer : public DeviceTimer {
 public:
  explicit HostTimer(int points) : times_(points) {}
  absl::Status Record(int point) override {
    if (point < 0 || point >= static_cast<int>(times_.size())) {
      return absl::OutOfRangeError(absl::StrCat("timer point ", point, " of ", times_.size()));
    }
    times_[point] = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedMs(int from, int to) override {
    if (from < 0 || to < 0 || from >= static_cast<int>(times_.size()) ||
        to >= static_cast<int>(times_.size())) {
      return absl::OutOfRangeError("timer point out of range");
    }
    return std::chrono::duration<double, std::milli>(times_[to] - times_[from]).count();
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> times_;
};

class HostStream : public DeviceStream {
 public:
  void* handle() const override { return nullptr; }
};

class HostEvent : public DeviceEvent {
 public:
  absl::Status Record(void* stream) override { return absl::OkStatus(); }
  absl::Status MakeStreamWait(void* stream) override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<DeviceStream> CreateHostStream() { return std::make_unique<HostStream>(); }

std::unique_ptr<DeviceEvent> CreateHostEvent() { return std::make_unique<HostEvent>(); }

std::unique_ptr<DeviceTimer> CreateHostTimer(int points) {
  return std::make_unique<HostTimer>(points);
}

std::unique_ptr<Device> CreateHostDevice() { return std::make_unique<HostDevice>(); }

}  // namespace kiln
