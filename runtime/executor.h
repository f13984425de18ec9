// Running a plan: an ExecutionContext owns one device's arenas (weights uploaded once,
// activations, workspace), its stream and the kernels' per-context resources. One plan may be
// run from several threads at once, each through its own context.
//
// Inputs and outputs are bound by name, either as host tensors (copied through page-locked
// staging buffers) or as device buffers the caller owns (no copy). On CUDA, after a first
// ordinary run the steps are captured as a CUDA graph and replayed while the bound device
// addresses stay the same. A run on device buffers may carry a StepObserver, which the host
// calls between steps; such a run enqueues its steps one by one (no graph).
#ifndef KILN_RUNTIME_EXECUTOR_H_
#define KILN_RUNTIME_EXECUTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/host_tensor.h"
#include "runtime/device.h"
#include "runtime/execution_plan.h"

namespace kiln {

class PlanWeights;

struct ContextOptions {
  // Debug switch: fill activations and workspace with 0xff bytes (NaN for floats) before every
  // run, so a kernel reading memory nobody wrote shows up as NaN. Turns CUDA graphs off.
  bool poison_buffers = false;
  // Capture the steps as a CUDA graph after the first run and replay it.
  bool use_cuda_graphs = true;
  // Debug switch: after every step, copy its outputs to the host and stop the run at the first
  // NaN or infinity, naming the step, its layers, the output and the element. Runs step by step
  // (no CUDA graph) and waits for each step: slow.
  bool check_finite = false;
  // The plan's weights already on its device, shared with other contexts (PlanWeights): this
  // context then uploads none and allocates only its activations and workspace. Null: the
  // context uploads a copy of its own.
  std::shared_ptr<const PlanWeights> weights;
};

// Lets the caller of a run act between its steps, on the host: for instance start work on
// another stream (an all-reduce of gradients) as soon as the step that writes its input has been
// enqueued, while the rest of the plan goes on. General on purpose: the executor knows nothing of
// what the caller does.
//
// A replayed graph enqueues every step at once, so there is no host moment between two steps to
// call back in (and the work the observer enqueues on other streams is never captured: collectives
// with timeouts and error polling cannot be). So an observer that wants every step makes the run
// enqueue its steps one by one. One that names the few steps it needs (call_after) gets a CUDA
// graph per stretch of steps between them instead: captured on the second such run, replayed
// while the stops and the bound addresses stay the same, with the callback between two stretches.
// Runs without an observer keep their own graph, which observed runs leave as it was.
struct StepObserver {
  // Called in step order for every plan step (an index into plan().steps(), views included),
  // right after the step's work has been enqueued on `stream` (the context's stream,
  // device().stream()): work enqueued on `stream` from then on runs after it, and on the host
  // device the step has run. A non-OK status stops the run; it is returned naming the step.
  std::function<absl::Status(int step, void* stream)> after_step;
  // The steps after_step is called after (strictly ascending plan step indices); empty: every
  // step. A list lets the steps between two of them run from a captured graph (see above).
  std::vector<int> call_after;
};

// Per-step device times of one instrumented run.
struct StepProfile {
  std::vector<double> step_ms;  // One per plan step (0 for views).
  double total_ms = 0;          // First step's start to last step's end.
};

// A plan's weights uploaded once to the plan's device (ExecutionPlan::cuda_device() for CUDA
// plans, host memory otherwise), read-only from then on: every ExecutionContext made with them
// (ContextOptions::weights) uses these bytes, so N contexts of one plan hold its weights once.
// Each context keeps a reference, so they live as long as the last of them. Contexts of one
// PlanWeights may run on several threads at once (a kernel never writes a weight).
class PlanWeights {
 public:
  static absl::StatusOr<std::shared_ptr<const PlanWeights>> Upload(const ExecutionPlan& plan);
  ~PlanWeights();
  PlanWeights(const PlanWeights&) = delete;
  PlanWeights& operator=(const PlanWeights&) = delete;

  const ExecutionPlan& plan() const { return plan_; }
  void* address() const { return data_; }
  int64_t bytes() const { return plan_.weights_bytes(); }

 private:
  PlanWeights(const ExecutionPlan& plan, std::unique_ptr<Device> device)
      : plan_(plan), device_(std::move(device)) {}
  const ExecutionPlan& plan_;
  std::unique_ptr<Device> device_;
  void* data_ = nullptr;
};

// Whether the weights arenas of `a` and `b` hold the same bytes at the same offsets on the same
// device, so that one PlanWeights serves both (plans of one network compiled for two batch
// sizes, say).
bool SameWeightsLayout(const ExecutionPlan& a, const ExecutionPlan& b);

class ExecutionContext {
 public:
  // Creates the device the plan's backend needs (for CUDA, its own stream and cuBLAS handle on
  // the plan's GPU), allocates its arenas and uploads the weights (or uses options.weights).
  // ResourceExhausted naming the bytes when the device has too little free memory.
  static absl::StatusOr<std::unique_ptr<ExecutionContext>> Create(
      const ExecutionPlan& plan, const ContextOptions& options = {});
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  Device& device() { return *device_; }
  const ExecutionPlan& plan() const { return plan_; }

  // Binds `inputs` (every graph input, by name, with the plan's dims and dtype; any strides),
  // runs every step and returns every graph output as a dense host tensor. Synchronous.
  absl::StatusOr<std::map<std::string, HostTensor>> Run(
      const std::map<std::string, HostTensor>& inputs);

  // Runs with device buffers the caller owns: every graph input and output by name, laid out
  // exactly as the plan's types say (plan().buffers()). No copies; the work is enqueued on the
  // context's stream (device().stream()) and this returns before it finishes: call
  // Synchronize() before reading the outputs. With an `observer` (not owned; may be null), its
  // after_step is called between the steps (see StepObserver).
  absl::Status RunOnDevice(const std::map<std::string, const void*>& inputs,
                           const std::map<std::string, void*>& outputs,
                           const StepObserver* observer = nullptr);
  // RunOnDevice ordered on the caller's stream `stream` (a cudaStream_t of the plan's GPU; null
  // means the context's own): the run starts after the work enqueued on `stream` so far, and
  // work the caller enqueues on `stream` afterwards starts after the run. Ordered with events on
  // the device, never by waiting on the host: this returns as soon as the work is enqueued.
  absl::Status RunOnStream(const std::map<std::string, const void*>& inputs,
                           const std::map<std::string, void*>& outputs, void* stream);
  absl::Status Synchronize();

  // These run the plan again on the inputs of the last Run: `iterations` whole forwards after
  // `warmup` ones, returning the median milliseconds of one (replaying the CUDA graph where
  // there is one). The plan may give an input's bytes to later values, so each forward first
  // copies the inputs in again from their page-locked staging; that copy is outside the timed
  // part (as a benchmark's input already on the device is).
  absl::StatusOr<double> TimeForward(int iterations, int warmup = 3);
  // One instrumented run with a timer marker between steps (no CUDA graph), on the last Run's
  // inputs copied in again first.
  absl::StatusOr<StepProfile> ProfileSteps();

  // Whether the last run replayed a captured CUDA graph, and why not when it could not.
  bool replayed_graph() const { return replayed_graph_; }
  const std::string& graph_capture_problem() const { return capture_problem_; }

 private:
  ExecutionContext(const ExecutionPlan& plan, std::unique_ptr<Device> device,
                   ContextOptions options)
      : plan_(plan), device_(std::move(device)), options_(options) {}
  void* Address(int buffer) const;
  // Runs the steps on the current addresses: replaying the captured graph when it matches them,
  // capturing one after the first ordinary run; step by step when there is an observer.
  absl::Status RunSteps(const StepObserver* observer = nullptr);
  absl::Status RunStepsEagerly(DeviceTimer* timer, const StepObserver* observer = nullptr);
  // Enqueues step i, or steps [begin, end), on the context's stream.
  absl::Status EnqueueStep(size_t i);
  absl::Status EnqueueSteps(size_t begin, size_t end);
  // An observed run with call_after: stretch by stretch, replaying or capturing each stretch's
  // graph, the observer called between them.
  absl::Status RunStretches(const StepObserver& observer);
  void DropGraph();
  void DropStretchGraphs();
  // check_finite's test of one step's outputs (it waits for the device).
  absl::Status CheckFinite(int step);
  // Copies the last Run's inputs from staging into the arena again (not those bound by the
  // caller, nor any of a device_bound_io plan).
  absl::Status StageInputsAgain();

  const ExecutionPlan& plan_;
  std::unique_ptr<Device> device_;
  ContextOptions options_;
  KernelResources resources_;
  std::shared_ptr<const PlanWeights> shared_weights_;  // null when weights_ is this context's own
  void* weights_ = nullptr;
  // RunOnStream's two events: the caller's stream to the context's, and back.
  std::unique_ptr<DeviceEvent> caller_ready_, run_done_;
  void* activations_ = nullptr;
  void* workspace_ = nullptr;
  // Page-locked copies of the graph's inputs and outputs, by buffer.
  std::map<int, void*> staging_;
  // Caller-owned device memory bound for the current run, by root buffer.
  std::map<int, void*> external_;
  // The captured graph and the bindings it was captured with.
  void* graph_ = nullptr;
  std::map<int, void*> graph_bindings_;
  int eager_runs_ = 0;
  // Observed runs with call_after: one graph per stretch of steps (captured so far), and the
  // stops and bindings of the last such run.
  std::vector<void*> stretch_graphs_;
  std::vector<int> stretch_stops_;
  std::map<int, void*> stretch_bindings_;
  bool capture_failed_ = false;
  bool replayed_graph_ = false;
  std::string capture_problem_;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_EXECUTOR_H_
