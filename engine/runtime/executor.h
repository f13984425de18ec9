// Running a plan: an ExecutionContext owns one device's arenas (weights uploaded once,
// activations, workspace); Run binds host inputs and outputs by name.
#ifndef KILN_ENGINE_RUNTIME_EXECUTOR_H_
#define KILN_ENGINE_RUNTIME_EXECUTOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/ir/host_tensor.h"
#include "engine/runtime/device.h"
#include "engine/runtime/execution_plan.h"

namespace kiln {

struct ContextOptions {
  // Debug switch: fill activations and workspace with 0xff bytes (NaN for floats) before every
  // run, so a kernel reading memory nobody wrote shows up as NaN.
  bool poison_buffers = false;
};

class ExecutionContext {
 public:
  // Creates the device the plan's backend needs, allocates its arenas and uploads the weights.
  static absl::StatusOr<std::unique_ptr<ExecutionContext>> Create(
      const ExecutionPlan& plan, const ContextOptions& options = {});
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  Device& device() { return *device_; }
  const ExecutionPlan& plan() const { return plan_; }

  // Binds `inputs` (every graph input, by name, with the plan's dims and dtype; any strides),
  // runs every step and returns every graph output as a dense host tensor.
  absl::StatusOr<std::map<std::string, HostTensor>> Run(
      const std::map<std::string, HostTensor>& inputs);

 private:
  ExecutionContext(const ExecutionPlan& plan, std::unique_ptr<Device> device,
                   ContextOptions options)
      : plan_(plan), device_(std::move(device)), options_(options) {}
  void* Address(int buffer) const;

  const ExecutionPlan& plan_;
  std::unique_ptr<Device> device_;
  ContextOptions options_;
  void* weights_ = nullptr;
  void* activations_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_EXECUTOR_H_
