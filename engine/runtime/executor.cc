#include "engine/runtime/executor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<ExecutionContext>> ExecutionContext::Create(
    const ExecutionPlan& plan, const ContextOptions& options) {
  std::unique_ptr<Device> device;
  if (plan.backend() == Backend::kCuda) {
    KILN_ASSIGN_OR_RETURN(device, CreateCudaDevice(0));
  } else {
    device = CreateHostDevice();
  }
  std::unique_ptr<ExecutionContext> ctx(new ExecutionContext(plan, std::move(device), options));
  KILN_ASSIGN_OR_RETURN(ctx->weights_, ctx->device_->Allocate(plan.weights_bytes()));
  KILN_ASSIGN_OR_RETURN(ctx->activations_, ctx->device_->Allocate(plan.activations_bytes()));
  KILN_ASSIGN_OR_RETURN(ctx->workspace_, ctx->device_->Allocate(plan.workspace_bytes()));
  for (const auto& [node, buffer] : plan.weights()) {
    const HostTensor& data = *node->constant();
    KILN_RETURN_IF_ERROR(ctx->device_->CopyToDevice(ctx->Address(buffer), data.data(),
                                                    static_cast<size_t>(data.type().span_bytes())));
  }
  return ctx;
}

ExecutionContext::~ExecutionContext() {
  if (device_ == nullptr) return;
  for (void* p : {weights_, activations_, workspace_}) {
    if (p != nullptr) device_->Free(p);
  }
}

void* ExecutionContext::Address(int buffer) const {
  const BufferAssignment& b = plan_.buffers()[buffer];
  char* base = static_cast<char*>(b.arena == Arena::kWeights ? weights_ : activations_);
  return base + b.offset;
}

absl::StatusOr<std::map<std::string, HostTensor>> ExecutionContext::Run(
    const std::map<std::string, HostTensor>& inputs) {
  for (const auto& [name, tensor] : inputs) {
    if (!plan_.inputs().count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("run: '", name, "' is not a graph input"));
    }
  }
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
    if (given.type().strides() == want.strides()) {
      KILN_RETURN_IF_ERROR(device_->CopyToDevice(Address(buffer), given.data(),
                                                 static_cast<size_t>(want.span_bytes())));
    } else {
      // Different strides: re-lay the elements in the plan's layout on the host first.
      HostTensor relaid(want);
      for (int64_t i = 0; i < want.num_elements(); ++i) relaid.SetFloat(i, given.GetFloat(i));
      KILN_RETURN_IF_ERROR(device_->CopyToDevice(Address(buffer), relaid.data(),
                                                 static_cast<size_t>(want.span_bytes())));
    }
  }
  for (const PlanStep& step : plan_.steps()) {
    KernelArgs args;
    for (int b : step.inputs) args.inputs.push_back({Address(b), plan_.buffers()[b].type});
    for (int b : step.outputs) args.outputs.push_back({Address(b), plan_.buffers()[b].type});
    args.workspace = workspace_;
    args.workspace_bytes = static_cast<size_t>(plan_.workspace_bytes());
    args.stream = device_->stream();
    args.blas_handle = device_->blas_handle();
    KILN_RETURN_IF_ERROR(
        Annotate(step.kernel->Run(args),
                 absl::StrCat("run: node '", step.node->name(), "' (", step.kernel_name, ")")));
  }
  KILN_RETURN_IF_ERROR(Annotate(device_->Synchronize(), "run"));
  std::map<std::string, HostTensor> outputs;
  for (const auto& [name, buffer] : plan_.outputs()) {
    const TensorType& type = plan_.buffers()[buffer].type;
    HostTensor out(type);
    KILN_RETURN_IF_ERROR(
        device_->CopyToHost(out.data(), Address(buffer), static_cast<size_t>(type.span_bytes())));
    outputs.emplace(name, std::move(out));
  }
  return outputs;
}

}  // namespace kiln
