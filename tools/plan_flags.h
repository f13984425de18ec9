// The flags every command that compiles a plan shares: --device, --precision, --layout, --algo,
// --tuning-file and --workspace-limit, parsed into CompileOptions with errors naming the flag.
#ifndef KILN_TOOLS_PLAN_FLAGS_H_
#define KILN_TOOLS_PLAN_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "engine/runtime/compiler.h"
#include "tools/command_line.h"

namespace kiln {

// The flag names, to add to a command's accepted set.
const std::set<std::string>& PlanFlagNames();

// --device auto|cuda|cpu|reference (default auto: CUDA when a GPU is usable and every layer has
// a CUDA kernel, else the CPU, saying why), --precision fp32|tf32|fp16|bf16 (default fp32),
// --layout nchw|nhwc|auto (default auto), --algo heuristic|measure (default heuristic),
// --tuning-file F (with measure), --workspace-limit BYTES (a number, or with a K/M/G suffix),
// --optimize on|off (default on: the inference rewrites of passes/), --disable-pass NAME[,...].
absl::Status ParsePlanFlags(const CommandLine& line, CompileOptions& options);

// The usage lines for the flags above.
const char* PlanFlagsUsage();

}  // namespace kiln

#endif  // KILN_TOOLS_PLAN_FLAGS_H_
