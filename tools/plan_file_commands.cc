#include "tools/plan_file_commands.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/executor.h"
#include "runtime/plan_file.h"
#include "tools/caffe_commands.h"
#include "tools/npy.h"

namespace kiln {
namespace {

// Refuses the flags a plan file already answers.
absl::Status RefuseModelFlags(const CommandLine& line, const char* command) {
  for (const char* other : {"model",
                            "weights",
                            "batch",
                            "fill-seed",
                            "precision",
                            "layout",
                            "algo",
                            "train",
                            "solver",
                            "compare-unfused",
                            "input-shape",
                            "phase",
                            "stage",
                            "level",
                            "debug",
                            "tuning-file",
                            "workspace-limit",
                            "workspace-budget",
                            "optimize",
                            "disable-pass",
                            "save-weights"}) {
    if (line.Has(other)) {
      return absl::InvalidArgumentError(absl::StrCat(command,
                                                     ": --plan holds the model and how it "
                                                     "was compiled; --",
                                                     other, " does not go with it"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PositiveIterations(const CommandLine& line) {
  if (!line.Has("iterations")) return 50;
  int64_t v = 0;
  if (!absl::SimpleAtoi(line.Get("iterations"), &v) || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--iterations ", line.Get("iterations"), ": expected a positive integer"));
  }
  return v;
}

struct LoadedPlanFile {
  LoadedPlan loaded;
  double load_ms = 0;
};

// Reads, checks and compiles the plan of --plan, on --device's GPU when one is given.
absl::StatusOr<LoadedPlanFile> LoadPlanFlag(const CommandLine& line) {
  int cuda_device = -1;
  if (line.Has("device")) {
    CompileOptions device;
    KILN_RETURN_IF_ERROR(ParseDeviceChoice(line.Get("device"), device));
    if (device.backend == BackendChoice::kCuda) cuda_device = device.cuda_device;
  }
  const std::string path = line.Get("plan");
  const auto started = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  LoadedPlanFile out;
  KILN_ASSIGN_OR_RETURN(
      out.loaded, LoadPlan(bytes, path, DefaultOpRegistry(), DefaultKernelRegistry(), cuda_device));
  out.load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace

absl::Status RunPlanFile(const CommandLine& line) {
  KILN_RETURN_IF_ERROR(RefuseModelFlags(line, "run"));
  KILN_ASSIGN_OR_RETURN(auto inputs, Pairs(line, "input"));
  KILN_ASSIGN_OR_RETURN(auto outputs, Pairs(line, "output"));
  std::vector<FlagPath> input_files = {{"--plan", line.Get("plan")}}, output_files;
  for (const auto& [name, path] : inputs) input_files.push_back({"--input " + name + "=", path});
  for (const auto& [name, path] : outputs) output_files.push_back({"--output " + name + "=", path});
  KILN_RETURN_IF_ERROR(
      CheckOutputFiles(input_files, output_files,
                       line.Has("overwrite") ? ExistingOutput::kReplace : ExistingOutput::kRefuse));
  KILN_ASSIGN_OR_RETURN(LoadedPlanFile file, LoadPlanFlag(line));
  const ExecutionPlan& plan = *file.loaded.plan;
  std::map<std::string, HostTensor> bindings;
  for (const auto& [name, path] : inputs) {
    auto port = plan.inputs().find(name);
    if (port == plan.inputs().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", name, ": the plan has no such input"));
    }
    KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
    KILN_ASSIGN_OR_RETURN(HostTensor array, ParseNpy(bytes, path));
    const TensorType& want = plan.buffers()[port->second].type;
    if (array.type().dims() != want.dims() || array.type().dtype() != want.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("--input ", name, ": the array is ",
                                                     array.type().ToString(), ", the plan takes ",
                                                     want.ToString()));
    }
    bindings[name] = array;
  }
  for (const auto& [name, buffer] : plan.inputs()) {
    if (!bindings.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' ",
                                                     plan.buffers()[buffer].type.ToString(),
                                                     " needs --input ", name, "=FILE.npy"));
    }
  }
  for (const auto& [name, path] : outputs) {
    if (!plan.outputs().count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--output ", name,
                       ": not an output of the saved plan (a plan's outputs are fixed when "
                       "it is compiled)"));
    }
  }
  KILN_ASSIGN_OR_RETURN(auto context, ExecutionContext::Create(plan));
  std::fprintf(stderr, "kiln run: %s loaded in %.1f ms, backend %s (%s)\n",
               line.Get("plan").c_str(), file.load_ms,
               std::string(BackendName(plan.backend())).c_str(), plan.backend_reason().c_str());
  KILN_ASSIGN_OR_RETURN(auto results, context->Run(bindings));
  return WriteRunOutputs(results, outputs);
}

absl::Status TimePlanFile(const CommandLine& line) {
  KILN_RETURN_IF_ERROR(RefuseModelFlags(line, "time"));
  KILN_ASSIGN_OR_RETURN(int64_t iterations, PositiveIterations(line));
  KILN_ASSIGN_OR_RETURN(LoadedPlanFile file, LoadPlanFlag(line));
  const LoadedPlan& loaded = file.loaded;
  const double load_ms = file.load_ms;
  const std::string path = line.Get("plan");
  const ExecutionPlan& plan = *loaded.plan;
  KILN_ASSIGN_OR_RETURN(auto context, ExecutionContext::Create(plan));
  std::map<std::string, HostTensor> bindings;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int64_t batch = 1;
  for (const auto& [name, buffer] : plan.inputs()) {
    HostTensor t(plan.buffers()[buffer].type);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, dist(rng));
    if (t.type().rank() > 0) batch = t.type().dim(0);
    bindings[name] = t;
  }
  KILN_RETURN_IF_ERROR(context->Run(bindings).status());
  KILN_ASSIGN_OR_RETURN(double ms, context->TimeForward(static_cast<int>(iterations)));
  std::printf(
      "%s: backend %s (%s), precision %s, layout %s, %zu steps; loaded in %.1f ms "
      "(%zu measured choices reused, none measured)\n",
      path.c_str(), std::string(BackendName(plan.backend())).c_str(), plan.backend_reason().c_str(),
      plan.precision().c_str(), plan.layout().c_str(), plan.steps().size(), load_ms,
      loaded.options.tuning_entries.size());
  std::printf("forward (median of %lld%s): %.4f ms, %.1f images/s\n",
              static_cast<long long>(iterations), context->replayed_graph() ? ", CUDA graph" : "",
              ms, ms > 0 ? batch * 1000.0 / ms : 0.0);
  return absl::OkStatus();
}

}  // namespace kiln
