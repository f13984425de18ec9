// Compile: Graph -> ExecutionPlan, in stages that fail separately (verify, order, backend and
// kernel selection, memory planning), each error prefixed with its stage.
#ifndef KILN_ENGINE_RUNTIME_COMPILER_H_
#define KILN_ENGINE_RUNTIME_COMPILER_H_

#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "engine/runtime/execution_plan.h"
#include "kernels/kernel_registry.h"

namespace kiln {

enum class BackendChoice {
  kAuto,       // CUDA when a GPU is usable and every node has a CUDA kernel, else CPU.
  kCuda,       // CUDA or an error.
  kCpu,        // Host: the fast CPU kernel where one applies, the reference kernel elsewhere.
  kReference,  // Host, reference kernels only (the oracle).
};

struct CompileOptions {
  BackendChoice backend = BackendChoice::kAuto;
  // Largest workspace any step may use; a step needing more is ResourceExhausted.
  int64_t workspace_limit = std::numeric_limits<int64_t>::max();
  // Debug switch: give every activation its own memory.
  bool reuse_activation_memory = true;
};

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Compile(const Graph& graph,
                                                       const KernelRegistry& kernels,
                                                       const CompileOptions& options = {});

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_COMPILER_H_
