// ExecutionPlan: the immutable result of compiling a graph: the steps in order, the kernel chosen
// for each node, and every value's buffer (arena + offset). One plan can be run from several
// threads, each with its own ExecutionContext.
#ifndef KILN_RUNTIME_EXECUTION_PLAN_H_
#define KILN_RUNTIME_EXECUTION_PLAN_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/kernel.h"
#include "passes/pass.h"

namespace kiln {

enum class Arena { kWeights, kActivations };

struct BufferAssignment {
  Arena arena = Arena::kActivations;
  int64_t offset = 0;
  int64_t bytes = 0;
  TensorType type;
  // Another buffer whose bytes this one shares: a view (Flatten/Reshape of a dense tensor) or an
  // in-place output (PlanStep::in_place); its index, whose arena and offset this one takes; -1
  // for a buffer of its own.
  int alias_of = -1;
  // Where inside alias_of's bytes this buffer starts (a Concat input placed in the output).
  int64_t alias_byte_offset = 0;
};

struct PlanStep {
  const Node* node = nullptr;
  std::string kernel_name;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs;  // Indices into ExecutionPlan::buffers().
  std::vector<int> outputs;
  size_t workspace_bytes = 0;
  // What the kernel chose at plan time ("algo=fft"), for dumps and `kiln time`.
  std::string description;
  // Output 0 is a view of an input (the planner aliased it): nothing runs.
  bool is_view = false;
  // The kernel may write output 0 over this input (Kernel::InPlaceInput), and
  bool in_place = false;  // the planner let it: output 0 shares that input's bytes.
  int in_place_input = -1;
  // Where this step's workspace starts in the activation arena (CompileOptions::
  // workspace_in_activation_arena); -1: the shared workspace arena.
  int64_t workspace_offset = -1;
};

class ExecutionPlan {
 public:
  Backend backend() const { return backend_; }
  // Why this backend: e.g. "cuda unavailable (...); using cpu".
  const std::string& backend_reason() const { return backend_reason_; }
  // The precision and layout the plan computes in ("fp32", "nchw"; "as graph" when the graph's
  // own types were kept).
  const std::string& precision() const { return precision_; }
  const std::string& layout() const { return layout_; }
  const Graph& graph() const { return *graph_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  const std::vector<BufferAssignment>& buffers() const { return buffers_; }
  // Graph inputs and outputs by name -> buffer index.
  const std::map<std::string, int>& inputs() const { return inputs_; }
  const std::map<std::string, int>& outputs() const { return outputs_; }
  // The buffer whose bytes `buffer` uses (itself unless it is a view).
  int RootBuffer(int buffer) const {
    while (buffers_[buffer].alias_of >= 0) buffer = buffers_[buffer].alias_of;
    return buffer;
  }
  // The byte offset of `buffer` inside its root buffer (0 unless it is a placed Concat input or
  // a view of one).
  int64_t OffsetInRoot(int buffer) const {
    int64_t offset = 0;
    while (buffers_[buffer].alias_of >= 0) {
      offset += buffers_[buffer].alias_byte_offset;
      buffer = buffers_[buffer].alias_of;
    }
    return offset;
  }
  // Constant nodes and the buffer each is uploaded into.
  const std::vector<std::pair<const Node*, int>>& weights() const { return weights_; }
  int64_t weights_bytes() const { return weights_bytes_; }
  // The activation arena (with the steps' workspaces when they are planned into it).
  int64_t activations_bytes() const { return activations_bytes_; }
  // The separate workspace arena (0 when each step's workspace is in the activation arena).
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // What the activations alone need, planned (no workspaces): the number compared with
  // Caffe's allocation.
  int64_t planned_activation_bytes() const { return planned_activation_bytes_; }
  // The largest workspace one step uses.
  int64_t largest_step_workspace() const { return largest_step_workspace_; }

  // What the workspace budget cost (CompileOptions::workspace_peak_slack): how many steps it
  // re-chose with a smaller workspace, and the measured milliseconds those re-choices add over
  // the unbounded choices (-1 when some re-chosen step has no measured time), beside the plan's
  // measured total (0 without --algo measure).
  int budget_rechosen_steps() const { return budget_rechosen_steps_; }
  double budget_added_ms() const { return budget_added_ms_; }
  double measured_ms() const { return measured_ms_; }

  // The measured algorithm choices the plan was made with (with AlgoChoice::kMeasure), by key:
  // what a saved plan keeps so that loading it measures nothing (runtime/plan_file.h).
  const std::map<std::string, std::string>& tuning_entries() const { return tuning_entries_; }
  // The GPU a CUDA plan was compiled for and runs on (CompileOptions::cuda_device).
  int cuda_device() const { return cuda_device_; }
  // Inputs and outputs are always bound by the caller (CompileOptions::device_bound_io).
  bool device_bound_io() const { return device_bound_io_; }
  // Planned for an absent GPU (CompileOptions::cuda_target): for inspection, never run.
  bool for_absent_device() const { return for_absent_device_; }

  // The rewrites the optimizer declined, with reasons (empty when it did not run).
  const std::vector<PassRemark>& remarks() const { return remarks_; }

  // A readable dump: backend, arenas, then one line per step with kernel and buffers.
  std::string ToString() const;

 private:
  friend class PlanBuilder;  // the compiler's stages (runtime/plan_builder.h) fill it in
  Backend backend_ = Backend::kReference;
  std::string backend_reason_;
  std::string precision_ = "as graph", layout_ = "as graph";
  std::unique_ptr<Graph> graph_;
  std::vector<PlanStep> steps_;
  std::vector<BufferAssignment> buffers_;
  std::map<std::string, int> inputs_, outputs_;
  std::vector<std::pair<const Node*, int>> weights_;
  int64_t weights_bytes_ = 0, activations_bytes_ = 0, workspace_bytes_ = 0;
  int64_t planned_activation_bytes_ = 0, largest_step_workspace_ = 0;
  std::vector<PassRemark> remarks_;
  bool device_bound_io_ = false;
  bool for_absent_device_ = false;
  int cuda_device_ = 0;
  std::map<std::string, std::string> tuning_entries_;
  int budget_rechosen_steps_ = 0;
  double budget_added_ms_ = 0, measured_ms_ = 0;
};

// One line on what the workspace budget cost: the re-chosen steps and the time they add.
std::string BudgetSummary(const ExecutionPlan& plan);

}  // namespace kiln

#endif  // KILN_RUNTIME_EXECUTION_PLAN_H_
