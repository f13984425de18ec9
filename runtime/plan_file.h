// Saved plans: a compiled network written to one file and read back without measuring anything.
//
// The file holds what decides a plan: the graph as it was given to Compile (its text IR, the
// weights as raw bytes), the CompileOptions, and every algorithm choice the compile measured
// (ExecutionPlan::tuning_entries). Loading compiles that graph again with those options and
// choices: the compiler's stages are deterministic, so the plan is the same one, and no
// algorithm is timed. **Decision:** the steps' prepared kernels are not serialized (each kernel
// family would need its own format for its launch state); re-running the cheap stages keeps the
// file independent of them, and the expensive part of a compile, measuring, is what it skips.
//
// A plan file is refused, with a message naming the difference, when it was written by another
// file-format or Kiln version, for another kind of GPU (name and compute capability) or another
// backend, or when it is damaged (a checksum over the whole file, and every length checked
// against the file's size before anything is read).
#ifndef KILN_RUNTIME_PLAN_FILE_H_
#define KILN_RUNTIME_PLAN_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "kernels/kernel_registry.h"
#include "runtime/compiler.h"
#include "runtime/execution_plan.h"

namespace kiln {

// The version of Kiln a plan file records and must match to be loaded.
extern const char kPlanKilnVersion[];

// The bytes of a plan file for `plan`, compiled from `source` with `options`.
absl::StatusOr<std::string> SerializePlan(const Graph& source, const CompileOptions& options,
                                          const ExecutionPlan& plan);

struct LoadedPlan {
  std::unique_ptr<Graph> source;  // the graph as the saved plan was compiled from
  CompileOptions options;         // its options, with the measured choices in tuning_entries
  std::unique_ptr<ExecutionPlan> plan;
};

// Reads and checks a plan file's bytes (`path` only names it in errors), then compiles it for
// GPU `cuda_device` (CUDA plans; -1 keeps the saved one) with the saved choices.
absl::StatusOr<LoadedPlan> LoadPlan(absl::string_view bytes, const std::string& path,
                                    const OpRegistry& ops, const KernelRegistry& kernels,
                                    int cuda_device = -1);

}  // namespace kiln

#endif  // KILN_RUNTIME_PLAN_FILE_H_
