#include "runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

bool IsExternallyBindable(const ExecutionPlan& plan, int buffer) {
  return plan.buffers()[buffer].arena == Arena::kActivations;
}

// The device a context or the shared weights of `plan` live on: its GPU, or the host.
absl::StatusOr<std::unique_ptr<Device>> CreateDeviceFor(const ExecutionPlan& plan) {
  if (plan.backend() != Backend::kCuda) return CreateHostDevice();
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice(plan.cuda_device());
  if (!device.ok()) return Annotate(device.status(), "run");
  return device;
}

// Copies every Constant of `plan` into the weights arena at `base` on `device`.
absl::Status UploadWeights(const ExecutionPlan& plan, Device& device, void* base) {
  for (const auto& [node, buffer] : plan.weights()) {
    const HostTensor& data = *node->constant();
    const int root = plan.RootBuffer(buffer);
    char* at = static_cast<char*>(base) + plan.buffers()[root].offset + plan.OffsetInRoot(buffer);
    KILN_RETURN_IF_ERROR(
        device.CopyToDevice(at, data.data(), static_cast<size_t>(data.type().span_bytes())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutionContext>> ExecutionContext::Create(
    const ExecutionPlan& plan, const ContextOptions& options) {
  if (plan.for_absent_device()) {
    return absl::FailedPreconditionError(
        "run: this plan was made for a GPU that is not here (cuda_target), to be inspected; "
        "compile it without cuda_target to run it");
  }
  if (options.weights != nullptr && !SameWeightsLayout(options.weights->plan(), plan)) {
    return absl::InvalidArgumentError(
        "run: the shared weights (ContextOptions::weights) were uploaded for a plan whose weights "
        "are laid out otherwise");
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDeviceFor(plan));
  const int64_t own_weights = options.weights != nullptr ? 0 : plan.weights_bytes();
  const int64_t needed = own_weights + plan.activations_bytes() + plan.workspace_bytes();
  const int64_t free_bytes = device->FreeMemoryBytes();
  if (free_bytes >= 0 && needed > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "run: the plan needs ", needed, " bytes of device memory (weights ", own_weights,
        ", activations ", plan.activations_bytes(), ", workspace ", plan.workspace_bytes(),
        ") but ", free_bytes, " are free on ", device->Describe()));
  }
  std::unique_ptr<ExecutionContext> ctx(new ExecutionContext(plan, std::move(device), options));
  if (options.weights != nullptr) {
    ctx->shared_weights_ = options.weights;
    ctx->weights_ = options.weights->address();
  } else {
    KILN_ASSIGN_OR_RETURN(ctx->weights_, ctx->device_->Allocate(plan.weights_bytes()));
    KILN_RETURN_IF_ERROR(UploadWeights(plan, *ctx->device_, ctx->weights_));
  }
  KILN_ASSIGN_OR_RETURN(ctx->activations_, ctx->device_->Allocate(plan.activations_bytes()));
  KILN_ASSIGN_OR_RETURN(ctx->workspace_, ctx->device_->Allocate(plan.workspace_bytes()));
  for (const auto* io : {&plan.inputs(), &plan.outputs()}) {
    if (plan.device_bound_io()) break;  // the caller binds device buffers: nothing to stage
    for (const auto& [name, buffer] : *io) {
      if (ctx->staging_.count(buffer)) continue;
      KILN_ASSIGN_OR_RETURN(ctx->staging_[buffer],
                            ctx->device_->AllocateStaging(static_cast<size_t>(
                                std::max<int64_t>(plan.buffers()[buffer].bytes, 1))));
    }
  }
  return ctx;
}

ExecutionContext::~ExecutionContext() {
  if (device_ == nullptr) return;
  device_->MakeCurrent().IgnoreError();
  device_->Synchronize().IgnoreError();  // nothing may still use what is freed below
  DropGraph();
  DropStretchGraphs();
  caller_ready_.reset();
  run_done_.reset();
  for (auto& [buffer, p] : staging_) device_->FreeStaging(p);
  for (void* p : {shared_weights_ != nullptr ? nullptr : weights_, activations_, workspace_}) {
    if (p != nullptr) device_->Free(p);
  }
}

bool SameWeightsLayout(const ExecutionPlan& a, const ExecutionPlan& b) {
  if (&a == &b) return true;
  if (a.backend() != b.backend() || a.cuda_device() != b.cuda_device() ||
      a.weights_bytes() != b.weights_bytes() || a.weights().size() != b.weights().size()) {
    return false;
  }
  for (size_t i = 0; i < a.weights().size(); ++i) {
    const auto& [node_a, buffer_a] = a.weights()[i];
    const auto& [node_b, buffer_b] = b.weights()[i];
    const HostTensor& data_a = *node_a->constant();
    const HostTensor& data_b = *node_b->constant();
    const int64_t at_a = a.buffers()[a.RootBuffer(buffer_a)].offset + a.OffsetInRoot(buffer_a);
    const int64_t at_b = b.buffers()[b.RootBuffer(buffer_b)].offset + b.OffsetInRoot(buffer_b);
    if (node_a->name() != node_b->name() || at_a != at_b || data_a.type() != data_b.type() ||
        std::memcmp(data_a.data(), data_b.data(), static_cast<size_t>(data_a.size_bytes())) != 0) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const PlanWeights>> PlanWeights::Upload(const ExecutionPlan& plan) {
  if (plan.for_absent_device()) {
    return absl::FailedPreconditionError(
        "run: this plan was made for a GPU that is not here (cuda_target); it has no device to "
        "upload weights to");
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDeviceFor(plan));
  std::shared_ptr<PlanWeights> weights(new PlanWeights(plan, std::move(device)));
  KILN_ASSIGN_OR_RETURN(weights->data_, weights->device_->Allocate(plan.weights_bytes()));
  KILN_RETURN_IF_ERROR(UploadWeights(plan, *weights->device_, weights->data_));
  return std::shared_ptr<const PlanWeights>(std::move(weights));
}

PlanWeights::~PlanWeights() {
  if (data_ != nullptr) device_->Free(data_);
}

void ExecutionContext::DropGraph() {
  if (graph_ != nullptr) device_->DestroyGraph(graph_);
  graph_ = nullptr;
  graph_bindings_.clear();
}

void ExecutionContext::DropStretchGraphs() {
  for (void* g : stretch_graphs_) device_->DestroyGraph(g);
  stretch_graphs_.clear();
  stretch_stops_.clear();
  stretch_bindings_.clear();
}

void* ExecutionContext::Address(int buffer) const {
  const int root = plan_.RootBuffer(buffer);
  const int64_t within = plan_.OffsetInRoot(buffer);
  auto bound = external_.find(root);
  if (bound != external_.end()) return static_cast<char*>(bound->second) + within;
  const BufferAssignment& b = plan_.buffers()[root];
  char* base = static_cast<char*>(b.arena == Arena::kWeights ? weights_ : activations_);
  return base + b.offset + within;
}

namespace {

// Whether `observer` wants to hear of `step`.
bool Wants(const StepObserver& observer, int step) {
  return observer.call_after.empty() ||
         std::binary_search(observer.call_after.begin(), observer.call_after.end(), step);
}

}  // namespace

absl::Status ExecutionContext::EnqueueSteps(size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) KILN_RETURN_IF_ERROR(EnqueueStep(i));
  return absl::OkStatus();
}

absl::Status ExecutionContext::RunStepsEagerly(DeviceTimer* timer, const StepObserver* observer) {
  const std::vector<PlanStep>& steps = plan_.steps();
  if (timer != nullptr) KILN_RETURN_IF_ERROR(timer->Record(0));
  for (size_t i = 0; i < steps.size(); ++i) {
    KILN_RETURN_IF_ERROR(EnqueueStep(i));
    if (timer != nullptr) KILN_RETURN_IF_ERROR(timer->Record(static_cast<int>(i) + 1));
    if (observer != nullptr && Wants(*observer, static_cast<int>(i))) {
      KILN_RETURN_IF_ERROR(
          Annotate(observer->after_step(static_cast<int>(i), device_->stream()),
                   absl::StrCat("run: after step ", i, " (node '", steps[i].node->name(), "')")));
    }
  }
  return absl::OkStatus();
}

absl::Status ExecutionContext::EnqueueStep(size_t i) {
  const PlanStep& step = plan_.steps()[i];
  if (!step.is_view) {
    KernelArgs args;
    for (int b : step.inputs) args.inputs.push_back({Address(b), plan_.buffers()[b].type});
    for (int b : step.outputs) args.outputs.push_back({Address(b), plan_.buffers()[b].type});
    if (step.workspace_offset >= 0) {
      args.workspace = static_cast<char*>(activations_) + step.workspace_offset;
      args.workspace_bytes = step.workspace_bytes;
    } else {
      args.workspace = workspace_;
      args.workspace_bytes = static_cast<size_t>(plan_.workspace_bytes());
    }
    args.stream = device_->stream();
    args.blas_handle = device_->blas_handle();
    args.resources = &resources_;
    KILN_RETURN_IF_ERROR(
        Annotate(step.kernel->Run(args),
                 absl::StrCat("run: node '", step.node->name(), "' (", step.kernel_name, ")")));
  }
  return absl::OkStatus();
}

absl::Status ExecutionContext::RunStretches(const StepObserver& observer) {
  const std::vector<int>& stops = observer.call_after;
  const int n = static_cast<int>(plan_.steps().size());
  // The first run with these stops and bindings goes step by step (kernels make their
  // per-context resources then, which capture would not allow); the next captures.
  if (stretch_stops_ != stops || stretch_bindings_ != external_) {
    DropStretchGraphs();
    stretch_stops_ = stops;
    stretch_bindings_ = external_;
    return RunStepsEagerly(nullptr, &observer);
  }
  int begin = 0;
  for (size_t k = 0; k <= stops.size(); ++k) {
    const int end = k < stops.size() ? stops[k] + 1 : n;  // this stretch: steps [begin, end)
    if (end > begin) {
      if (k < stretch_graphs_.size()) {
        KILN_RETURN_IF_ERROR(
            Annotate(device_->Replay(stretch_graphs_[k]), "run: replaying a stretch's graph"));
        replayed_graph_ = true;
      } else if (capture_failed_) {
        KILN_RETURN_IF_ERROR(EnqueueSteps(begin, end));
      } else {
        KILN_RETURN_IF_ERROR(device_->BeginCapture());
        absl::Status recorded = EnqueueSteps(begin, end);
        absl::StatusOr<void*> graph = device_->EndCapture();
        if (!recorded.ok() || !graph.ok()) {
          // Nothing of this stretch ran: note why, and run it (and every later one) step by step.
          capture_failed_ = true;
          capture_problem_ = std::string((recorded.ok() ? graph.status() : recorded).message());
          if (graph.ok()) device_->DestroyGraph(*graph);
          KILN_RETURN_IF_ERROR(EnqueueSteps(begin, end));
        } else {
          stretch_graphs_.push_back(*graph);
          KILN_RETURN_IF_ERROR(
              Annotate(device_->Replay(*graph), "run: replaying a stretch's graph"));
          replayed_graph_ = true;
        }
      }
    } else if (k >= stretch_graphs_.size() && !capture_failed_) {
      stretch_graphs_.push_back(nullptr);  // an empty stretch (a stop on the last step)
    }
    if (k < stops.size()) {
      KILN_RETURN_IF_ERROR(Annotate(observer.after_step(stops[k], device_->stream()),
                                    absl::StrCat("run: after step ", stops[k], " (node '",
                                                 plan_.steps()[stops[k]].node->name(), "')")));
    }
    begin = end;
  }
  return absl::OkStatus();
}

absl::Status ExecutionContext::CheckFinite(int step) {
  const PlanStep& s = plan_.steps()[step];
  if (s.is_view) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(device_->Synchronize());
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const TensorType& type = plan_.buffers()[s.outputs[o]].type;
    const DataType dtype = type.dtype();
    if (dtype != DataType::kF32 && dtype != DataType::kF16 && dtype != DataType::kBF16) continue;
    HostTensor host(type);
    KILN_RETURN_IF_ERROR(device_->CopyToHost(host.data(), Address(s.outputs[o]),
                                             static_cast<size_t>(type.span_bytes())));
    for (int64_t i = 0; i < type.num_elements(); ++i) {
      const float v = host.GetFloat(i);
      if (std::isfinite(v)) continue;
      return absl::DataLossError(absl::StrCat(
          "check-finite: step ", step, " '", s.node->name(), "' (", s.kernel_name, "; layers ",
          absl::StrJoin(s.node->origins(), " + "), ") wrote ", std::isnan(v) ? "NaN" : "inf",
          " at element ", i, " of output ", o, " ", type.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status ExecutionContext::RunSteps(const StepObserver* observer) {
  replayed_graph_ = false;
  if (options_.check_finite) {
    // Step by step, the caller's observer first, then the check.
    StepObserver checked;
    checked.after_step = [&](int step, void* stream) -> absl::Status {
      if (observer != nullptr && observer->after_step && Wants(*observer, step)) {
        KILN_RETURN_IF_ERROR(observer->after_step(step, stream));
      }
      return CheckFinite(step);
    };
    return RunStepsEagerly(nullptr, &checked);
  }
  const bool graphs = options_.use_cuda_graphs && !options_.poison_buffers &&
                      device_->kind() == DeviceKind::kCuda && !capture_failed_;
  // An observed run leaves the plain graph and its bookkeeping alone, so the next unobserved run
  // replays or captures as it would have. It goes step by step, or by stretches when it names
  // its stops (StepObserver says why).
  if (observer != nullptr && observer->after_step) {
    if (graphs && !observer->call_after.empty()) return RunStretches(*observer);
    return RunStepsEagerly(nullptr, observer);
  }
  if (graphs && graph_ != nullptr && graph_bindings_ == external_) {
    KILN_RETURN_IF_ERROR(Annotate(device_->Replay(graph_), "run: replaying the CUDA graph"));
    replayed_graph_ = true;
    return absl::OkStatus();
  }
  // The first run with these bindings goes step by step (kernels make their per-context
  // resources then, which capture would not allow); the next one is captured.
  if (!graphs || eager_runs_ == 0 || graph_bindings_ != external_) {
    if (graph_ != nullptr && graph_bindings_ != external_) DropGraph();
    graph_bindings_ = external_;
    ++eager_runs_;
    return RunStepsEagerly(nullptr);
  }
  KILN_RETURN_IF_ERROR(device_->BeginCapture());
  absl::Status recorded = RunStepsEagerly(nullptr);
  absl::StatusOr<void*> graph = device_->EndCapture();
  if (!recorded.ok() || !graph.ok()) {
    // Some kernel cannot be captured: note why and keep running step by step.
    capture_failed_ = true;
    capture_problem_ = std::string((recorded.ok() ? graph.status() : recorded).message());
    if (graph.ok()) device_->DestroyGraph(*graph);
    return RunStepsEagerly(nullptr);
  }
  graph_ = *graph;
  graph_bindings_ = external_;
  KILN_RETURN_IF_ERROR(Annotate(device_->Replay(graph_), "run: replaying the CUDA graph"));
  replayed_graph_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, HostTensor>> ExecutionContext::Run(
    const std::map<std::string, HostTensor>& inputs) {
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  if (plan_.device_bound_io()) {
    return absl::FailedPreconditionError(
        "run: this plan's inputs and outputs are bound by the caller (device_bound_io); use "
        "RunOnDevice");
  }
  for (const auto& [name, tensor] : inputs) {
    if (!plan_.inputs().count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("run: '", name, "' is not a graph input"));
    }
  }
  external_.clear();
  if (options_.poison_buffers) {
    KILN_RETURN_IF_ERROR(device_->Fill(activations_, 0xff, plan_.activations_bytes()));
    KILN_RETURN_IF_ERROR(device_->Fill(workspace_, 0xff, plan_.workspace_bytes()));
  }
  for (const auto& [name, buffer] : plan_.inputs()) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("run: input '", name, "' is not bound"));
    }
    const TensorType& want = plan_.buffers()[buffer].type;
    const HostTensor& given = it->second;
    if (given.type().dims() != want.dims() || given.type().dtype() != want.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("run: input '", name, "' is ",
                                                     given.type().ToString(),
                                                     " but the graph needs ", want.ToString()));
    }
    const size_t bytes = static_cast<size_t>(want.span_bytes());
    void* staging = staging_.at(buffer);
    if (given.type().strides() == want.strides()) {
      std::memcpy(staging, given.data(), bytes);
    } else {
      // Different strides: re-lay the elements in the plan's layout on the host first.
      HostTensor relaid(want);
      for (int64_t i = 0; i < want.num_elements(); ++i) relaid.SetFloat(i, given.GetFloat(i));
      std::memcpy(staging, relaid.data(), bytes);
    }
    KILN_RETURN_IF_ERROR(device_->CopyToDeviceAsync(Address(buffer), staging, bytes));
  }
  KILN_RETURN_IF_ERROR(RunSteps());
  for (const auto& [name, buffer] : plan_.outputs()) {
    KILN_RETURN_IF_ERROR(
        device_->CopyToHostAsync(staging_.at(buffer), Address(buffer),
                                 static_cast<size_t>(plan_.buffers()[buffer].type.span_bytes())));
  }
  KILN_RETURN_IF_ERROR(Annotate(device_->Synchronize(), "run"));
  std::map<std::string, HostTensor> outputs;
  for (const auto& [name, buffer] : plan_.outputs()) {
    const TensorType& type = plan_.buffers()[buffer].type;
    HostTensor out(type);
    std::memcpy(out.data(), staging_.at(buffer), static_cast<size_t>(type.span_bytes()));
    outputs.emplace(name, std::move(out));
  }
  return outputs;
}

absl::Status ExecutionContext::RunOnDevice(const std::map<std::string, const void*>& inputs,
                                           const std::map<std::string, void*>& outputs,
                                           const StepObserver* observer) {
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  std::map<int, void*> bound;
  auto bind = [&](const std::map<std::string, int>& ports, const std::string& name, void* p,
                  const char* what) -> absl::Status {
    auto it = ports.find(name);
    if (it == ports.end()) {
      return absl::InvalidArgumentError(absl::StrCat("run: '", name, "' is not a graph ", what));
    }
    if (p == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("run: ", what, " '", name, "' is null"));
    }
    const int root = plan_.RootBuffer(it->second);
    if (!IsExternallyBindable(plan_, root)) {
      return absl::UnimplementedError(absl::StrCat(
          "run: ", what, " '", name, "' is a view of a weight; bind it as a host tensor"));
    }
    auto [slot, added] = bound.emplace(root, p);
    if (!added && slot->second != p) {
      return absl::InvalidArgumentError(
          absl::StrCat("run: ", what, " '", name,
                       "' shares its bytes with another input or output of the "
                       "plan and must be bound to the same address"));
    }
    return absl::OkStatus();
  };
  for (const auto& [name, p] : inputs) {
    KILN_RETURN_IF_ERROR(bind(plan_.inputs(), name, const_cast<void*>(p), "input"));
  }
  for (const auto& [name, p] : outputs) {
    KILN_RETURN_IF_ERROR(bind(plan_.outputs(), name, p, "output"));
  }
  for (const auto* ports : {&plan_.inputs(), &plan_.outputs()}) {
    for (const auto& [name, buffer] : *ports) {
      if (!bound.count(plan_.RootBuffer(buffer))) {
        return absl::InvalidArgumentError(absl::StrCat("run: '", name, "' is not bound"));
      }
    }
  }
  if (observer != nullptr) {
    const std::vector<int>& stops = observer->call_after;
    for (size_t k = 0; k < stops.size(); ++k) {
      if (stops[k] < 0 || stops[k] >= static_cast<int>(plan_.steps().size()) ||
          (k > 0 && stops[k] <= stops[k - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("run: the observer's call_after must be ascending steps of the plan's ",
                         plan_.steps().size(), "; entry ", k, " is ", stops[k]));
      }
    }
  }
  external_ = std::move(bound);
  if (options_.poison_buffers) {
    KILN_RETURN_IF_ERROR(device_->Fill(activations_, 0xff, plan_.activations_bytes()));
    KILN_RETURN_IF_ERROR(device_->Fill(workspace_, 0xff, plan_.workspace_bytes()));
  }
  return RunSteps(observer);
}

absl::Status ExecutionContext::RunOnStream(const std::map<std::string, const void*>& inputs,
                                           const std::map<std::string, void*>& outputs,
                                           void* stream) {
  if (stream == nullptr || stream == device_->stream()) return RunOnDevice(inputs, outputs);
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  if (caller_ready_ == nullptr) {
    KILN_ASSIGN_OR_RETURN(caller_ready_, device_->CreateEvent());
    KILN_ASSIGN_OR_RETURN(run_done_, device_->CreateEvent());
  }
  // The caller's work so far, then the run on the context's stream, then the caller's again.
  KILN_RETURN_IF_ERROR(Annotate(caller_ready_->Record(stream), "run: the caller's stream"));
  KILN_RETURN_IF_ERROR(caller_ready_->MakeStreamWait(device_->stream()));
  KILN_RETURN_IF_ERROR(RunOnDevice(inputs, outputs));
  KILN_RETURN_IF_ERROR(run_done_->Record(device_->stream()));
  return Annotate(run_done_->MakeStreamWait(stream), "run: the caller's stream");
}

absl::Status ExecutionContext::Synchronize() {
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  return Annotate(device_->Synchronize(), "run");
}

absl::Status ExecutionContext::StageInputsAgain() {
  if (plan_.device_bound_io()) return absl::OkStatus();
  for (const auto& [name, buffer] : plan_.inputs()) {
    auto staging = staging_.find(buffer);
    if (staging == staging_.end() || external_.count(plan_.RootBuffer(buffer))) continue;
    KILN_RETURN_IF_ERROR(
        device_->CopyToDeviceAsync(Address(buffer), staging->second,
                                   static_cast<size_t>(plan_.buffers()[buffer].type.span_bytes())));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ExecutionContext::TimeForward(int iterations, int warmup) {
  if (iterations < 1) return absl::InvalidArgumentError("time: iterations must be >= 1");
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  for (int i = 0; i < warmup; ++i) {
    KILN_RETURN_IF_ERROR(StageInputsAgain());
    KILN_RETURN_IF_ERROR(RunSteps());
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTimer> timer, device_->CreateTimer(2 * iterations));
  std::vector<double> ms;
  // A marker before and after each forward; the inputs' copy sits between forwards.
  for (int i = 0; i < iterations; ++i) {
    KILN_RETURN_IF_ERROR(StageInputsAgain());
    KILN_RETURN_IF_ERROR(timer->Record(2 * i));
    KILN_RETURN_IF_ERROR(RunSteps());
    KILN_RETURN_IF_ERROR(timer->Record(2 * i + 1));
  }
  KILN_RETURN_IF_ERROR(Synchronize());
  for (int i = 0; i < iterations; ++i) {
    KILN_ASSIGN_OR_RETURN(double t, timer->ElapsedMs(2 * i, 2 * i + 1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

absl::StatusOr<StepProfile> ExecutionContext::ProfileSteps() {
  KILN_RETURN_IF_ERROR(device_->MakeCurrent());
  const int n = static_cast<int>(plan_.steps().size());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTimer> timer, device_->CreateTimer(n + 1));
  KILN_RETURN_IF_ERROR(StageInputsAgain());
  KILN_RETURN_IF_ERROR(RunStepsEagerly(timer.get()));
  KILN_RETURN_IF_ERROR(Synchronize());
  StepProfile profile;
  for (int i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(double t, timer->ElapsedMs(i, i + 1));
    profile.step_ms.push_back(t);
  }
  KILN_ASSIGN_OR_RETURN(profile.total_ms, timer->ElapsedMs(0, n));
  return profile;
}

}  // namespace kiln
