#include "tools/plan_flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "kernels/tuning_cache.h"

namespace kiln {

namespace {

absl::Status FlagError(const std::string& flag, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", s.message()));
}

absl::StatusOr<int64_t> ParseBytes(std::string text) {
  int64_t scale = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        scale = int64_t{1} << 10;
        break;
      case 'M':
        scale = int64_t{1} << 20;
        break;
      case 'G':
        scale = int64_t{1} << 30;
        break;
      default:
        break;
    }
    if (scale != 1) text.pop_back();
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0 || value > (INT64_MAX / scale)) {
    return absl::InvalidArgumentError("expected a byte count such as 1073741824, 512M or 1G");
  }
  return value * scale;
}

}  // namespace

std::string DefaultTuningCacheFile() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR")) {
    return *dir == '\0' ? "" : absl::StrCat(dir, "/tuning.tsv");
  }
  // XDG's rule: a relative XDG_CACHE_HOME (or HOME) is ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return absl::StrCat(xdg, "/kiln/tuning.tsv");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return absl::StrCat(home, "/.cache/kiln/tuning.tsv");
  }
  return "";
}

const std::set<std::string>& PlanFlagNames() {
  static const std::set<std::string>* names = new std::set<std::string>{
      "device",          "precision",        "layout",   "algo",        "tuning-file",
      "workspace-limit", "workspace-budget", "optimize", "disable-pass"};
  return *names;
}

absl::Status ParsePlanFlags(const CommandLine& line, CompileOptions& options) {
  const std::string device = line.Get("device", "auto");
  if (!ParseDeviceChoice(device, options).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", device, ": use auto, cuda, cuda:N, cpu or reference"));
  }
  auto precision = ParsePrecision(line.Get("precision", "fp32"));
  if (!precision.ok()) return FlagError("precision", precision.status());
  options.precision = *precision;
  auto layout = ParseLayoutChoice(line.Get("layout", "auto"));
  if (!layout.ok()) return FlagError("layout", layout.status());
  options.layout = *layout;
  // Measuring is the default, remembered in the per-user cache, so only a command's first run
  // on a GPU pays for it (docs/PERF.md, "fast by default").
  auto algo = ParseAlgoChoice(line.Get("algo", "measure"));
  if (!algo.ok()) return FlagError("algo", algo.status());
  options.algo = *algo;
  if (line.Has("tuning-file")) {
    if (options.algo != AlgoChoice::kMeasure) {
      return absl::InvalidArgumentError(
          "--tuning-file holds measured choices: use it with --algo measure");
    }
    options.tuning_file = line.Get("tuning-file");
  } else if (options.algo == AlgoChoice::kMeasure) {
    options.tuning_file = DefaultTuningCacheFile();
    options.tuning_file_is_cache = !options.tuning_file.empty();
    if (options.tuning_file_is_cache) {
      TuningCache probe;
      const std::string damaged = probe.LoadIfValid(options.tuning_file);
      if (!damaged.empty()) {
        std::fprintf(stderr, "kiln: the tuning cache is damaged (%s): measuring again\n",
                     damaged.c_str());
      }
    }
  }
  const std::string optimize = line.Get("optimize", "on");
  if (optimize != "on" && optimize != "off" && optimize != "memory") {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimize ", optimize, ": use on, off or memory"));
  }
  options.optimize = optimize != "off";
  options.split_for_memory = optimize == "memory";
  for (const std::string& list : line.GetAll("disable-pass")) {
    for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      options.disabled_passes.insert(std::string(name));
    }
  }
  if (line.Has("workspace-limit")) {
    auto bytes = ParseBytes(line.Get("workspace-limit"));
    if (!bytes.ok()) return FlagError("workspace-limit", bytes.status());
    options.workspace_limit = *bytes;
  }
  if (line.Has("workspace-budget")) {
    double factor = 0;  // not a number: refused as a factor below 1
    if (!absl::SimpleAtod(line.Get("workspace-budget"), &factor)) factor = 0;
    absl::Status budget = SetWorkspaceBudget(factor, options);
    if (!budget.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workspace-budget ", line.Get("workspace-budget"), ": ", budget.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseCudaTargetFlag(const CommandLine& line, CompileOptions& options) {
  if (!line.Has("cuda-target")) return absl::OkStatus();
  const std::string target = line.Get("cuda-target");
  CudaDeviceInfo device;
  device.total_memory = int64_t{80} << 30;
  if (target == "sm_90") {
    device = {0, "absent H100 (sm_90, 132 SMs)", 9, 0, device.total_memory, 132};
  } else if (target == "sm_80") {
    device = {0, "absent A100 (sm_80, 108 SMs)", 8, 0, device.total_memory, 108};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-target ", target, ": use sm_80 or sm_90"));
  }
  const std::string backend = line.Get("device", "cuda");
  if (backend != "cuda" && backend != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-target plans for a GPU; --device ", backend, " contradicts it"));
  }
  if (options.algo == AlgoChoice::kMeasure) {
    if (line.Has("algo")) {
      return absl::InvalidArgumentError(
          "--cuda-target plans for a GPU that is not here: --algo measure cannot time on it");
    }
    // The default measuring cannot time an absent GPU: the heuristic plans it.
    options.algo = AlgoChoice::kHeuristic;
    options.tuning_file.clear();
    options.tuning_file_is_cache = false;
  }
  options.backend = BackendChoice::kCuda;
  options.cuda_target = device;
  return absl::OkStatus();
}

absl::Status ParseDebugFlag(const CommandLine& line, CompileOptions& compile,
                            ContextOptions& context) {
  for (const std::string& list : line.GetAll("debug")) {
    for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      if (name == "no-reuse") {
        compile.reuse_activation_memory = false;
      } else if (name == "no-in-place") {
        compile.in_place = false;
      } else if (name == "poison") {
        context.poison_buffers = true;
      } else if (name == "check-finite") {
        context.check_finite = true;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--debug ", name, ": use no-reuse, no-in-place, poison or check-finite"));
      }
    }
  }
  return absl::OkStatus();
}

const char* PlanFlagsUsage() {
  return "            [--device auto|cuda|cuda:N|cpu|reference] [--precision fp32|tf32|fp16|bf16]\n"
         "            [--layout nchw|nhwc|auto] [--algo measure|heuristic]\n"
         "            [--tuning-file F] [--workspace-limit BYTES] [--workspace-budget FACTOR]\n"
         "            [--optimize on|off|memory] [--disable-pass NAME[,NAME...]]\n";
}

}  // namespace kiln
