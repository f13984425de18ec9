// The registration every CPU kernel shares: f32, priority 10, a fixed choice.
#ifndef KILN_KERNELS_CPU_CPU_KERNEL_H_
#define KILN_KERNELS_CPU_CPU_KERNEL_H_

#include <cstddef>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Registers "<op>.cpu.f32.<layout>.<algorithm>": `check` says whether a node can run, `make`
// builds its kernel (its parameters checked then), and `workspace` (null: none) says what that
// kernel will need, before it is made.
absl::Status RegisterCpuKernel(KernelRegistry& registry, const char* op, const char* layout,
                               const char* algorithm,
                               std::function<absl::Status(const Node&)> check,
                               std::function<absl::StatusOr<Kernel*>(const Node&)> make,
                               std::function<size_t(const Node&)> workspace = nullptr);

}  // namespace kiln

#endif  // KILN_KERNELS_CPU_CPU_KERNEL_H_
