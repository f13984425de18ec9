// What the C API's opaque handles hold (include/kiln/kiln.h), and the one way every entry point
// reports a failure: the thread's last error message plus the status code. Internal to libkiln.
#ifndef KILN_API_API_STATE_H_
#define KILN_API_API_STATE_H_

#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/blob_net.h"
#include "frontends/caffe/training/solver_trainer.h"
#include "ir/graph_builder.h"
#include "ir/host_tensor.h"
#include "kiln/kiln.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "runtime/plan_report.h"

namespace kiln::c_api {

// Records `status` as this thread's last error and returns its code (KILN_OK for OK).
kiln_status Report(const absl::Status& status);

// Runs `body` (returning absl::Status) and reports its result; an exception (out of memory in a
// container, say) becomes an error too, so no input ends the caller's process.
template <typename Body>
kiln_status Guarded(const char* where, Body&& body) {
  try {
    return Report(body());
  } catch (const std::bad_alloc&) {
    return Report(absl::ResourceExhaustedError(std::string(where) + ": out of host memory"));
  } catch (const std::exception& e) {
    return Report(absl::InternalError(std::string(where) + ": " + e.what()));
  } catch (...) {
    return Report(absl::InternalError(std::string(where) + ": an unknown exception"));
  }
}

// InvalidArgument "where: `what` is NULL" when `p` is null.
absl::Status NotNull(const void* p, const char* where, const char* what);

// The options with their defaults filled in where the caller left them unset (NULL strings).
absl::StatusOr<CompileOptions> ToCompileOptions(const kiln_compile_options* options,
                                                const char* where);

absl::StatusOr<DataType> ToDataType(kiln_dtype dtype);
absl::StatusOr<kiln_dtype> FromDataType(DataType dtype);

// "name=value, name=value" in Kiln's text IR attribute syntax; errors start with `where`.
absl::StatusOr<AttrMap> ParseAttributes(absl::string_view text, const std::string& where);

// Fills `info` for a blob or parameter of `shape` (more than KILN_MAX_RANK dims is an error).
absl::Status DescribeBlob(const std::string& name, int index, const std::vector<int64_t>& shape,
                          float* data, float* diff, kiln_blob_info& info, const char* where);

// An input or output of a plan, as the C API describes it.
struct TensorPort {
  std::string name;
  int buffer = -1;
  TensorType type;
  kiln_tensor_info info{};
};

// One more batch size of a variable-batch engine: its plan, and the weights it runs with (the
// engine's own when they are laid out alike, SameWeightsLayout).
struct BatchProfile {
  int64_t batch = 0;
  std::unique_ptr<ExecutionPlan> plan;
  std::shared_ptr<const PlanWeights> weights;
};

// A compiled plan and its weights on the device: what an engine is, shared by the contexts made
// from it (each holds a reference, so it outlives the engine handle if they do).
struct EngineState {
  // Variable batch: `plan` is for max_batch, `smaller` for the powers of two below it
  // (ascending). 0 and empty for a fixed batch.
  int64_t max_batch = 0;
  std::vector<BatchProfile> smaller;
  std::unique_ptr<Graph> source;  // as given to Compile, and its options: what a saved plan keeps
  CompileOptions options;
  std::unique_ptr<ExecutionPlan> plan;
  std::shared_ptr<const PlanWeights> weights;
  std::vector<TensorPort> inputs, outputs;
  std::string description;
  // The files it was compiled from (a Caffe model's prototxt and caffemodel): a save never
  // writes over them, whatever `overwrite` says.
  std::vector<std::string> source_files;
  // What the reports say of the plan (api/report_api.cc): the source layers each step stands for
  // (a Caffe model's prototxt layers; none for a built graph or a loaded plan, whose steps then
  // name their graph nodes), and the activation bytes the plan is compared with: Caffe's own
  // count for a Caffe model ("caffe"), else -1 for the plan's arena with nothing shared
  // ("unshared", UnsharedArenaBytes). The declined rewrites are the plan's own
  // (ExecutionPlan::remarks).
  LayerIndex layers;
  int64_t naive_activation_bytes = -1;
  // The report texts, each made once at its first request (the engine is shared by threads).
  std::once_flag report_once, dot_once, svg_once;
  std::string report_json, graph_dot, memory_svg;
};

// Compiles `graph` at batch `batch` as another profile of `state` (whose plan is the largest).
absl::Status AddBatchProfile(EngineState& state, const Graph& graph, int64_t batch);

// The host-memory run of a context at the batch its inputs have (kiln_context_run).
absl::Status RunContext(kiln_context& context);

absl::StatusOr<std::shared_ptr<EngineState>> MakeEngine(const Graph& graph,
                                                        const CompileOptions& options);
// An engine of a plan already compiled from `source` with `options` (a loaded plan file).
absl::StatusOr<std::shared_ptr<EngineState>> MakeEngineFromPlan(
    std::unique_ptr<Graph> source, const CompileOptions& options,
    std::unique_ptr<ExecutionPlan> compiled);

}  // namespace kiln::c_api

struct kiln_graph {
  std::unique_ptr<kiln::GraphBuilder> builder;
  std::vector<kiln::Value> values;  // a kiln_value indexes this
  std::string text;                 // kiln_graph_text's last answer
};

struct kiln_engine {
  std::shared_ptr<kiln::c_api::EngineState> state;
};

struct kiln_context {
  std::shared_ptr<kiln::c_api::EngineState> engine;
  std::unique_ptr<kiln::ExecutionContext> context;  // of the engine's plan (its largest batch)
  // Of the smaller batch profiles, made at their first use.
  std::map<int64_t, std::unique_ptr<kiln::ExecutionContext>> by_batch;
  int64_t batch = 0;                                // of the last run
  kiln::ExecutionContext* last_run = nullptr;       // the plan's context the last run used
  std::map<std::string, kiln::HostTensor> inputs;   // set by kiln_context_set_input
  std::map<std::string, kiln::HostTensor> outputs;  // of the last kiln_context_run
};

struct kiln_trainer {
  kiln::SolverConfig solver;
  caffe::NetParameter initial_weights;
  std::unique_ptr<kiln::SolverTrainer> trainer;
  std::string snapshot_prefix;  // the solver's, resolved as `kiln train` does
  std::vector<kiln::SolverTrainer::ParamBlob> params;
  mutable std::string text;  // the last JSON answer
};

struct kiln_net {
  std::unique_ptr<kiln::BlobNet> net;
};

#endif  // KILN_API_API_STATE_H_
