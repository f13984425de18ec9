// `kiln compile`: compiles a Caffe model as `kiln run` would and prints the plan: each step that
// runs (views do not) with the prototxt layers it covers, the planned activation bytes beside
// Caffe's own allocation for the same net and batch (one buffer per distinct top blob name,
// in-place tops sharing their bottom's), and the workspace. With --why-not-fused, every
// rewrite the compiler declined with its reason.
#include "tools/compile_command.h"

#include <chrono>
#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/plan_layers.h"
#include "kernels/all_kernels.h"
#include "runtime/compiler.h"
#include "runtime/plan_file.h"
#include "runtime/plan_report.h"
#include "tools/caffe_commands.h"
#include "tools/plan_flags.h"

namespace kiln {

namespace {

absl::Status Compile(int argc, char** argv) {
  std::set<std::string> flags = CommonModelFlags();
  flags.insert({"fill-seed", "batch", "cuda-target", "save-plan"});
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  std::set<std::string> switches = CommonModelSwitches();
  switches.insert({"json", "why-not-fused"});
  KILN_ASSIGN_OR_RETURN(CommandLine line, CommandLine::Parse(argc, argv, 2, flags, switches));
  KILN_RETURN_IF_ERROR(CheckCommandFiles(
      line, {},
      line.Has("save-plan") ? std::vector<FlagPath>{{"--save-plan", line.Get("save-plan")}}
                            : std::vector<FlagPath>{}));
  CaffeImportOptions options;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, options));
  KILN_RETURN_IF_ERROR(ApplyFillSeedFlag(line, options));
  CompileOptions compile;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, compile));
  KILN_RETURN_IF_ERROR(ParseCudaTargetFlag(line, compile));
  KILN_RETURN_IF_ERROR(ApplyBatchFlag(line, options));
  LoadedModel loaded;
  KILN_RETURN_IF_ERROR(LoadModel(line, options, loaded));
  const CaffeModel& model = loaded.model;
  const auto started = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(auto plan, Compile(*model.graph, DefaultKernelRegistry(), compile));
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (line.Has("save-plan")) {
    // The graph as imported, the options, the measured choices and the weights (plan_file.h).
    KILN_ASSIGN_OR_RETURN(std::string bytes, SerializePlan(*model.graph, compile, *plan));
    KILN_RETURN_IF_ERROR(WriteFileBytes(line.Get("save-plan"), bytes));
    std::fprintf(stderr, "kiln compile: plan written to %s (%.1f MiB; compiled in %.1f ms)\n",
                 line.Get("save-plan").c_str(), bytes.size() / 1048576.0, compile_ms);
  }
  const LayerIndex index = CaffeLayerIndex(model);
  const int64_t naive = CaffeActivationBytes(model);
  std::vector<StepRow> rows;  // the steps that run (views do not)
  for (StepRow& row : StepRows(*plan, index)) {
    if (!row.view) rows.push_back(std::move(row));
  }
  if (line.Has("json")) {
    std::string out =
        absl::StrCat("{\"model\": ", JsonString(line.Get("model")),
                     ", \"backend\": ", JsonString(std::string(BackendName(plan->backend()))),
                     ", \"precision\": ", JsonString(plan->precision()),
                     ", \"layout\": ", JsonString(plan->layout()), ", \"steps\": ", rows.size(),
                     ", \"kernels\": [");
    for (size_t i = 0; i < rows.size(); ++i) {
      absl::StrAppend(&out, i ? ", " : "", StepJson(rows[i], /*detail=*/false));
    }
    absl::StrAppend(&out, "], \"naive_activation_bytes\": ", naive,
                    ", \"planned_activation_bytes\": ", plan->planned_activation_bytes(),
                    ", \"arena_bytes\": ", plan->activations_bytes(),
                    ", \"workspace_bytes\": ", plan->largest_step_workspace(),
                    ", \"separate_workspace_bytes\": ", plan->workspace_bytes(),
                    ", \"weights_bytes\": ", plan->weights_bytes(),
                    ", \"workspace_budget\": {\"rechosen_steps\": ", plan->budget_rechosen_steps(),
                    absl::StrFormat(", \"added_ms\": %.4f, \"measured_ms\": %.4f}",
                                    plan->budget_added_ms(), plan->measured_ms()),
                    ", \"not_fused\": ", DeclinedRewritesJson(*plan), "}\n");
    std::fputs(out.c_str(), stdout);
    return absl::OkStatus();
  }
  std::printf("%s: backend %s (%s), precision %s, layout %s, %zu steps\n",
              line.Get("model").c_str(), std::string(BackendName(plan->backend())).c_str(),
              plan->backend_reason().c_str(), plan->precision().c_str(), plan->layout().c_str(),
              rows.size());
  std::printf("%-4s %-28s %-44s %s\n", "step", "node", "kernel", "layers");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%-4zu %-28s %-44s %s%s\n", i, rows[i].name.c_str(), rows[i].kernel.c_str(),
                absl::StrJoin(rows[i].layers, " + ").c_str(),
                rows[i].in_place ? "  (in place)" : "");
  }
  std::printf(
      "activations: %.1f MiB planned, %.1f MiB as Caffe allocates them (%.2fx less); largest "
      "step workspace %.1f MiB; arena with the step workspaces %.1f MiB; weights %.1f MiB\n",
      plan->planned_activation_bytes() / 1048576.0, naive / 1048576.0,
      plan->planned_activation_bytes() > 0
          ? static_cast<double>(naive) / plan->planned_activation_bytes()
          : 0.0,
      plan->largest_step_workspace() / 1048576.0,
      (plan->activations_bytes() + plan->workspace_bytes()) / 1048576.0,
      plan->weights_bytes() / 1048576.0);
  if (plan->budget_rechosen_steps() > 0) std::printf("%s\n", BudgetSummary(*plan).c_str());
  if (line.Has("why-not-fused")) std::fputs(DeclinedRewritesText(*plan).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace

int CompileCommand(int argc, char** argv) {
  absl::Status status = Compile(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace kiln
