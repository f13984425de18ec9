// The reports of the C API (include/kiln/kiln.h): what the compiler made of an engine's network,
// as JSON, graphviz and SVG (runtime/plan_report.h, the same as `kiln compile` and `kiln dump`
// show), and the timing of a context's forward.
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/api_state.h"
#include "base/json_text.h"

namespace kiln::c_api {
namespace {

// The device an engine's plan runs on: "cuda:N" or "cpu" (the host backends).
std::string DeviceOf(const ExecutionPlan& plan) {
  return plan.backend() == Backend::kCuda ? absl::StrCat("cuda:", plan.cuda_device()) : "cpu";
}

std::string ReportJson(const EngineState& engine) {
  const ExecutionPlan& plan = *engine.plan;
  std::string out = absl::StrCat("{\"backend\": ", JsonString(BackendName(plan.backend())),
                                 ", \"backend_reason\": ", JsonString(plan.backend_reason()),
                                 ", \"device\": ", JsonString(DeviceOf(plan)),
                                 ", \"precision\": ", JsonString(plan.precision()),
                                 ", \"layout\": ", JsonString(plan.layout()),
                                 ", \"max_batch\": ", engine.max_batch, ", \"steps\": [");
  const std::vector<StepRow> rows = StepRows(plan, engine.layers);
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", StepJson(rows[i], /*detail=*/true));
  }
  const bool caffe = engine.naive_activation_bytes >= 0;
  absl::StrAppend(&out, "], \"why_not_fused\": ", DeclinedRewritesJson(plan),
                  ", \"memory\": {\"arena_bytes\": ", plan.activations_bytes(),
                  ", \"planned_activation_bytes\": ", plan.planned_activation_bytes(),
                  ", \"naive_activation_bytes\": ",
                  caffe ? engine.naive_activation_bytes : UnsharedArenaBytes(plan),
                  ", \"naive_kind\": ", JsonString(caffe ? "caffe" : "unshared"),
                  ", \"workspace_bytes\": ", plan.largest_step_workspace(),
                  ", \"separate_workspace_bytes\": ", plan.workspace_bytes(),
                  ", \"weights_bytes\": ", plan.weights_bytes(),
                  ", \"workspace_budget\": {\"rechosen_steps\": ", plan.budget_rechosen_steps(),
                  absl::StrFormat(", \"added_ms\": %.4f, \"measured_ms\": %.4f}",
                                  plan.budget_added_ms(), plan.measured_ms()),
                  ", \"buffers\": [");
  const std::vector<ArenaBuffer> buffers = ArenaBuffers(plan);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const ArenaBuffer& b = buffers[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"buffer\": ", b.buffer,
                    ", \"name\": ", JsonString(b.name), ", \"offset\": ", b.offset,
                    ", \"bytes\": ", b.bytes, ", \"first_step\": ", b.first_step,
                    ", \"last_step\": ", b.last_step, "}");
  }
  return out + "]}}";
}

// One of the engine's report texts, made once by `make`; "" with the error for a NULL engine.
template <typename Make>
const char* EngineText(const kiln_engine* engine, const char* where,
                       std::once_flag EngineState::*once, std::string EngineState::*text,
                       Make make) {
  const char* result = "";
  Guarded(where, [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    EngineState& state = *engine->state;
    std::call_once(state.*once, [&] { state.*text = make(state); });
    result = (state.*text).c_str();
    return absl::OkStatus();
  });
  return result;
}

}  // namespace
}  // namespace kiln::c_api

using kiln::c_api::EngineState;
using kiln::c_api::EngineText;
using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

extern "C" {

const char* kiln_engine_report_json(const kiln_engine* engine) {
  return EngineText(engine, "kiln_engine_report_json", &EngineState::report_once,
                    &EngineState::report_json, kiln::c_api::ReportJson);
}

const char* kiln_engine_graph_dot(const kiln_engine* engine) {
  return EngineText(engine, "kiln_engine_graph_dot", &EngineState::dot_once,
                    &EngineState::graph_dot,
                    [](const EngineState& s) { return kiln::PlanToDot(*s.plan, s.layers); });
}

const char* kiln_engine_memory_svg(const kiln_engine* engine) {
  return EngineText(engine, "kiln_engine_memory_svg", &EngineState::svg_once,
                    &EngineState::memory_svg,
                    [](const EngineState& s) { return kiln::MemoryToSvg(*s.plan); });
}

kiln_status kiln_context_time(kiln_context* context, int iterations, int warmup,
                              double* milliseconds) {
  return Guarded("kiln_context_time", [&]() -> absl::Status {
    const char* where = "kiln_context_time";
    KILN_RETURN_IF_ERROR(NotNull(context, where, "context"));
    KILN_RETURN_IF_ERROR(NotNull(milliseconds, where, "milliseconds"));
    *milliseconds = 0;
    if (iterations < 1 || iterations > 1000000) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": iterations is ", iterations,
                                                     "; give 1 to 1000000 timed forwards"));
    }
    if (warmup < 0 || warmup > 1000000) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": warmup is ", warmup, "; give 0 to 1000000 untimed forwards"));
    }
    // One ordinary run on the inputs set: checks them and stages them where TimeForward copies
    // them in again before each forward, on the plan of their batch.
    absl::Status run = kiln::c_api::RunContext(*context);
    if (!run.ok()) return kiln::Annotate(run, where);
    absl::StatusOr<double> ms = context->last_run->TimeForward(iterations, warmup);
    if (!ms.ok()) return kiln::Annotate(ms.status(), where);
    *milliseconds = *ms;
    return absl::OkStatus();
  });
}

}  // extern "C"
