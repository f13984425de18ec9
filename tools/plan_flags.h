// The flags every command that compiles a plan shares: --device, --precision, --layout, --algo,
// --tuning-file and --workspace-limit, parsed into CompileOptions with errors naming the flag.
#ifndef KILN_TOOLS_PLAN_FLAGS_H_
#define KILN_TOOLS_PLAN_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tools/command_line.h"

namespace kiln {

// The per-user tuning cache the default --algo measure keeps its choices in (keyed by problem,
// precision and GPU, so one file serves every GPU): $KILN_CACHE_DIR/tuning.tsv (set but empty:
// no cache), else $XDG_CACHE_HOME/kiln/tuning.tsv, else $HOME/.cache/kiln/tuning.tsv; "" when
// none of them is set.
std::string DefaultTuningCacheFile();

// The flag names, to add to a command's accepted set.
const std::set<std::string>& PlanFlagNames();

// --device auto|cuda|cuda:N|cpu|reference (default auto: CUDA when a GPU is usable and every layer
// has a CUDA kernel, else the CPU, saying why), --precision fp32|tf32|fp16|bf16 (default fp32),
// --layout nchw|nhwc|auto (default auto), --algo measure|heuristic (default measure: each
// convolution's algorithms timed on the GPU, the choices kept in the per-user cache
// DefaultTuningCacheFile() unless --tuning-file names another file; heuristic measures nothing),
// --tuning-file F (with measure), --workspace-limit BYTES (a number, or with a K/M/G suffix),
// --optimize on|off|memory (default on: the inference rewrites of passes/; memory adds the
// rewrites that trade speed for memory), --disable-pass NAME[,...].
absl::Status ParsePlanFlags(const CommandLine& line, CompileOptions& options);

// --cuda-target sm_80|sm_90, for the commands that only inspect a plan (compile, dump): plan
// for that GPU (an A100's or an H100's SM count) on a machine without one, on the cuda backend
// with the heuristic algorithm choice (CompileOptions::cuda_target: no FFT, no Hopper-only
// kernels). Call after ParsePlanFlags.
absl::Status ParseCudaTargetFlag(const CommandLine& line, CompileOptions& options);

// --debug SWITCH[,SWITCH...], for `kiln run`: no-reuse (every value its own memory),
// no-in-place (no step writes over its input), poison (activations and workspace filled with
// NaN bytes before the run), check-finite (stop at the first step that writes a NaN or an
// infinity, naming it). A new name for an unknown switch is an error listing them.
absl::Status ParseDebugFlag(const CommandLine& line, CompileOptions& compile,
                            ContextOptions& context);

// The usage lines for the flags above.
const char* PlanFlagsUsage();

}  // namespace kiln

#endif  // KILN_TOOLS_PLAN_FLAGS_H_
