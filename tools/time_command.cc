// `kiln time`: Caffe's `caffe time` for a Kiln plan. One instrumented run gives each layer's
// forward time (device timers between steps, summed per original prototxt layer); then the
// un-instrumented plan (a replayed CUDA graph on the GPU) is timed over whole forwards, back to
// back, and the median is what the total, images/s and the comparison with other engines use.
#include "tools/time_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/plan_layers.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tools/caffe_commands.h"
#include "tools/multi_gpu_launch.h"
#include "tools/plan_file_commands.h"
#include "tools/plan_flags.h"
#include "tools/train_command.h"

namespace kiln {

namespace {

struct LayerTime {
  std::string name, type;
  double ms = 0;
  std::vector<std::string> kernels;
  // The largest workspace any of the layer's steps uses: which layer sets the plan's peak.
  int64_t workspace_bytes = 0;
};

absl::StatusOr<int64_t> PositiveFlag(const CommandLine& line, const std::string& flag,
                                     int64_t fallback) {
  if (!line.Has(flag)) return fallback;
  int64_t v = 0;
  if (!absl::SimpleAtoi(line.Get(flag), &v) || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", line.Get(flag), ": expected a positive integer"));
  }
  return v;
}

absl::Status Time(int argc, char** argv) {
  std::set<std::string> flags = CommonModelFlags();
  flags.insert(
      {"fill-seed", "batch", "iterations", "solver", "loss-scale", "profile-steps", "plan"});
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  flags.insert(DistributedFlagNames().begin(), DistributedFlagNames().end());
  std::set<std::string> switches = CommonModelSwitches();
  switches.insert({"json", "compare-unfused", "train", "profile"});
  switches.insert(DistributedSwitchNames().begin(), DistributedSwitchNames().end());
  KILN_ASSIGN_OR_RETURN(CommandLine line, CommandLine::Parse(argc, argv, 2, flags, switches));
  const bool distributed = line.Has("gpus") || line.Has("rank") || line.Has("world-size") ||
                           line.Has("rendezvous") || line.Has("sync-bn") || line.Has("no-overlap");
  if (distributed && !line.Has("train")) {
    return absl::InvalidArgumentError(
        "time: --gpus, --rank, --world-size, --rendezvous, --sync-bn and --no-overlap go with "
        "--train");
  }
  if (line.Has("profile-steps") && !line.Has("profile")) {
    return absl::InvalidArgumentError("time: --profile-steps goes with --train --profile");
  }
  KILN_RETURN_IF_ERROR(
      CheckCommandFiles(line, {},
                        line.Has("profile-steps")
                            ? std::vector<FlagPath>{{"--profile-steps", line.Get("profile-steps")}}
                            : std::vector<FlagPath>{}));
  if (line.Has("train") && line.Has("gpus")) {
    KILN_RETURN_IF_ERROR(ParseDistributedFlags(line, "time --train").status());
    if (!line.Has("model")) return absl::InvalidArgumentError("time --train: --model is required");
    return LaunchOnGpus(argc, argv, 2, "time --train");
  }
  if (line.Has("plan")) return TimePlanFile(line);
  if (line.Has("train")) return TimeTrainingStep(line);
  if (line.Has("solver")) return absl::InvalidArgumentError("--solver goes with --train");
  CaffeImportOptions options;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, options));
  if (line.Has("weights") && line.Has("fill-seed")) {
    return absl::InvalidArgumentError("give --weights or --fill-seed, not both");
  }
  KILN_ASSIGN_OR_RETURN(int64_t seed, PositiveFlag(line, "fill-seed", 1));
  options.fill_seed = static_cast<uint64_t>(seed);
  KILN_ASSIGN_OR_RETURN(int64_t iterations, PositiveFlag(line, "iterations", 50));
  CompileOptions compile;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, compile));
  const bool json = line.Has("json");

  // The batch replaces dim 0 of every input: the structure is read once to learn the shapes.
  KILN_RETURN_IF_ERROR(ApplyBatchFlag(line, options));
  LoadedModel loaded;
  KILN_RETURN_IF_ERROR(LoadModel(line, options, loaded));
  const CaffeModel& model = loaded.model;
  if (!json) std::fprintf(stderr, "kiln time: compiling...\n");
  KILN_ASSIGN_OR_RETURN(auto plan, Compile(*model.graph, DefaultKernelRegistry(), compile));
  KILN_ASSIGN_OR_RETURN(auto context, ExecutionContext::Create(*plan));

  // Random inputs in [-1, 1): timing does not depend on the values, and zeros could flatter it.
  std::map<std::string, HostTensor> bindings;
  int64_t batch = 1;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const CaffeInput& input : model.inputs) {
    const Node* node = model.graph->FindNode(input.node);
    if (node == nullptr) return absl::InternalError("time: an input has no graph node");
    HostTensor t(node->output_types()[0]);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, dist(rng));
    bindings[input.node] = t;
    if (!input.dims.empty()) batch = input.dims[0];
  }
  KILN_RETURN_IF_ERROR(context->Run(bindings).status());  // warm: resources made, graph captured

  // Per layer: one instrumented run, each step's time given to the layers it came from (a fused
  // step's row names all of its layers: "conv1+relu1").
  const LayerIndex index = CaffeLayerIndex(model);
  std::vector<std::string> layer_order;
  KILN_ASSIGN_OR_RETURN(StepProfile profile, context->ProfileSteps());
  std::map<std::string, LayerTime> layers;
  for (size_t i = 0; i < plan->steps().size(); ++i) {
    const PlanStep& step = plan->steps()[i];
    // Steps the compiler added (dtype/layout conversions at the edges) keep their own names.
    const std::vector<std::string> covered = index.LayersOf(*step.node);
    const std::string layer = absl::StrJoin(covered, "+");
    LayerTime& t = layers[layer];
    if (t.name.empty()) {
      t.name = layer;
      std::vector<std::string> types;
      for (const std::string& l : covered) {
        const std::string type = index.TypeOf(l);
        types.push_back(type.empty() ? step.node->op() : type);
      }
      t.type = absl::StrJoin(types, "+");
      layer_order.push_back(layer);
    }
    t.ms += profile.step_ms[i];
    if (!step.is_view) {
      t.workspace_bytes = std::max<int64_t>(t.workspace_bytes, step.workspace_bytes);
    }
    t.kernels.push_back(step.is_view
                            ? "view"
                            : absl::StrCat(step.kernel_name, step.description.empty() ? "" : " ",
                                           step.description));
  }
  if (!json)
    std::fprintf(stderr, "kiln time: timing %lld forwards...\n",
                 static_cast<long long>(iterations));
  KILN_ASSIGN_OR_RETURN(double forward_ms, context->TimeForward(static_cast<int>(iterations)));
  const double images_per_s = forward_ms > 0 ? batch * 1000.0 / forward_ms : 0;
  // --compare-unfused: the same net compiled without the rewrites, timed the same way after
  // the fused plan's memory is given back, for the two totals side by side.
  double unfused_ms = -1;
  int64_t unfused_bytes = -1;
  if (line.Has("compare-unfused") && compile.optimize) {
    if (!json) std::fprintf(stderr, "kiln time: compiling and timing the unfused plan...\n");
    CompileOptions plain = compile;
    plain.optimize = false;
    KILN_ASSIGN_OR_RETURN(auto unfused_plan, Compile(*model.graph, DefaultKernelRegistry(), plain));
    KILN_ASSIGN_OR_RETURN(auto unfused_context, ExecutionContext::Create(*unfused_plan));
    KILN_RETURN_IF_ERROR(unfused_context->Run(bindings).status());
    KILN_ASSIGN_OR_RETURN(unfused_ms, unfused_context->TimeForward(static_cast<int>(iterations)));
    unfused_bytes = unfused_plan->weights_bytes() + unfused_plan->activations_bytes() +
                    unfused_plan->workspace_bytes();
  }
  const int64_t total_bytes =
      plan->weights_bytes() + plan->activations_bytes() + plan->workspace_bytes();
  const std::string device = context->device().Describe();

  if (json) {
    std::string out = absl::StrCat(
        "{\"model\": ", JsonString(line.Get("model")), ", \"batch\": ", batch,
        ", \"precision\": ", JsonString(plan->precision()),
        ", \"layout\": ", JsonString(plan->layout()),
        ", \"backend\": ", JsonString(std::string(BackendName(plan->backend()))),
        ", \"backend_reason\": ", JsonString(plan->backend_reason()),
        ", \"device\": ", JsonString(device), ", \"iterations\": ", iterations,
        ", \"cuda_graph\": ", context->replayed_graph() ? "true" : "false",
        absl::StrFormat(", \"forward_ms\": %.4f, \"images_per_s\": %.1f", forward_ms, images_per_s),
        unfused_ms >= 0
            ? absl::StrFormat(", \"unfused_forward_ms\": %.4f, \"unfused_total_bytes\": %d",
                              unfused_ms, unfused_bytes)
            : "",
        ", \"memory\": {\"weights_bytes\": ", plan->weights_bytes(),
        ", \"activations_bytes\": ", plan->activations_bytes(),
        ", \"workspace_bytes\": ", plan->workspace_bytes(),
        ", \"planned_activation_bytes\": ", plan->planned_activation_bytes(),
        ", \"largest_step_workspace_bytes\": ", plan->largest_step_workspace(),
        ", \"total_bytes\": ", total_bytes, "}",
        ", \"workspace_budget\": {\"rechosen_steps\": ", plan->budget_rechosen_steps(),
        absl::StrFormat(", \"added_ms\": %.4f, \"measured_ms\": %.4f}", plan->budget_added_ms(),
                        plan->measured_ms()),
        ", \"layers\": [");
    for (size_t i = 0; i < layer_order.size(); ++i) {
      const LayerTime& t = layers[layer_order[i]];
      absl::StrAppend(&out, i ? ", " : "", "{\"name\": ", JsonString(t.name),
                      ", \"type\": ", JsonString(t.type), absl::StrFormat(", \"ms\": %.4f", t.ms),
                      ", \"workspace_bytes\": ", t.workspace_bytes, ", \"kernels\": [");
      for (size_t k = 0; k < t.kernels.size(); ++k) {
        absl::StrAppend(&out, k ? ", " : "", JsonString(t.kernels[k]));
      }
      out += "]}";
    }
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    return absl::OkStatus();
  }
  std::printf("%s: batch %lld, backend %s (%s), precision %s, layout %s\n",
              line.Get("model").c_str(), static_cast<long long>(batch),
              std::string(BackendName(plan->backend())).c_str(), plan->backend_reason().c_str(),
              plan->precision().c_str(), plan->layout().c_str());
  std::printf("%-28s %-16s %10s  %s\n", "layer", "type", "forward ms", "kernel");
  for (const std::string& name : layer_order) {
    const LayerTime& t = layers[name];
    std::printf("%-28s %-16s %10.4f  %s%s\n", t.name.c_str(), t.type.c_str(), t.ms,
                t.kernels[0].c_str(), t.kernels.size() > 1 ? " ..." : "");
  }
  std::printf("sum of layers (instrumented run): %.4f ms\n", profile.total_ms);
  std::printf("forward (median of %lld, %s): %.4f ms, %.1f images/s\n",
              static_cast<long long>(iterations),
              context->replayed_graph() ? "CUDA graph" : "step by step", forward_ms, images_per_s);
  if (unfused_ms >= 0) {
    std::printf("unfused plan (--optimize off): %.4f ms, %.1f MiB; fused is %.2fx faster\n",
                unfused_ms, unfused_bytes / 1048576.0,
                forward_ms > 0 ? unfused_ms / forward_ms : 0.0);
  }
  if (!context->graph_capture_problem().empty()) {
    std::printf("(no CUDA graph: %s)\n", context->graph_capture_problem().c_str());
  }
  std::printf(
      "device memory: weights %.1f MiB, activations with the step workspaces %.1f MiB "
      "(activations alone %.1f MiB, largest step workspace %.1f MiB), separate workspace "
      "%.1f MiB, total %.1f MiB on %s\n",
      plan->weights_bytes() / 1048576.0, plan->activations_bytes() / 1048576.0,
      plan->planned_activation_bytes() / 1048576.0, plan->largest_step_workspace() / 1048576.0,
      plan->workspace_bytes() / 1048576.0, total_bytes / 1048576.0, device.c_str());
  if (plan->budget_rechosen_steps() > 0) std::printf("%s\n", BudgetSummary(*plan).c_str());
  return absl::OkStatus();
}

}  // namespace

int TimeCommand(int argc, char** argv) {
  absl::Status status = Time(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace kiln
