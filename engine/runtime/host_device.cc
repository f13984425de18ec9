#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/runtime/device.h"

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

}  // namespace

std::unique_ptr<Device> CreateHostDevice() { return std::make_unique<HostDevice>(); }

}  // namespace kiln
