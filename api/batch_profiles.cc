// Variable batch (kiln_compile_options.max_batch): an engine holds plans for several batch sizes
// and a context runs each batch on the smallest plan that fits, its extra rows zero. Every op an
// inference plan has treats the rows of a batch independently, so the first B rows of a padded
// run are those of a batch-B run (up to the rounding of algorithms chosen for another size).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "api/api_state.h"
#include "kernels/all_kernels.h"

namespace kiln::c_api {
namespace {

// `t` with `rows` rows: its first rows (fewer) or itself then zero rows (more). Dense row-major.
absl::StatusOr<HostTensor> WithRows(const HostTensor& t, int64_t rows) {
  std::vector<int64_t> dims = t.type().dims();
  if (dims.empty()) return absl::InternalError("a batch of a rank-0 tensor");
  const int64_t have = dims[0];
  dims[0] = rows;
  KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(t.type().dtype(), dims));
  HostTensor out(type);
  const size_t row_bytes = have > 0 ? static_cast<size_t>(t.size_bytes() / have) : 0;
  const size_t copied = row_bytes * static_cast<size_t>(std::min(have, rows));
  std::memcpy(out.data(), t.data(), copied);
  std::memset(static_cast<char*>(out.data()) + copied, 0,
              static_cast<size_t>(out.size_bytes()) - copied);
  return out;
}

// A dense copy of `t` (plan outputs may be strided, e.g. channels-last).
absl::StatusOr<HostTensor> Dense(const HostTensor& t) {
  if (t.type().IsContiguous()) return t;
  KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(t.type().dtype(), t.type().dims()));
  HostTensor out(type);
  for (int64_t i = 0; i < type.num_elements(); ++i) out.SetFloat(i, t.GetFloat(i));
  return out;
}

}  // namespace

absl::Status AddBatchProfile(EngineState& state, const Graph& graph, int64_t batch) {
  BatchProfile profile;
  profile.batch = batch;
  KILN_ASSIGN_OR_RETURN(profile.plan, Compile(graph, DefaultKernelRegistry(), state.options));
  if (SameWeightsLayout(*state.plan, *profile.plan)) {
    profile.weights = state.weights;
  } else {
    KILN_ASSIGN_OR_RETURN(profile.weights, PlanWeights::Upload(*profile.plan));
  }
  state.smaller.push_back(std::move(profile));
  return absl::OkStatus();
}

absl::Status RunContext(kiln_context& context) {
  const EngineState& engine = *context.engine;
  // The batch the inputs were given at (all the same), and the plan that takes it.
  int64_t batch = -1;
  for (const TensorPort& port : engine.inputs) {
    auto it = context.inputs.find(port.name);
    if (it == context.inputs.end()) {
      return absl::FailedPreconditionError(absl::StrCat("kiln_context_run: input '", port.name,
                                                        "' was not set (kiln_context_set_input)"));
    }
    const int64_t rows = it->second.type().rank() > 0 ? it->second.type().dim(0) : 1;
    if (batch >= 0 && rows != batch) {
      return absl::InvalidArgumentError(
          absl::StrCat("kiln_context_run: the inputs were set with different batches (", batch,
                       " and ", rows, " rows for '", port.name, "')"));
    }
    batch = rows;
  }
  ExecutionContext* run = context.context.get();
  int64_t plan_batch = engine.max_batch;
  for (const BatchProfile& profile : engine.smaller) {
    if (profile.batch < batch) continue;
    auto& made = context.by_batch[profile.batch];
    if (made == nullptr) {
      ContextOptions options;
      options.weights = profile.weights;
      KILN_ASSIGN_OR_RETURN(made, ExecutionContext::Create(*profile.plan, options));
    }
    run = made.get();
    plan_batch = profile.batch;
    break;
  }
  std::map<std::string, HostTensor> inputs;
  for (const auto& [name, tensor] : context.inputs) {
    if (engine.max_batch == 0 || batch == plan_batch) {
      inputs[name] = tensor;
    } else {
      KILN_ASSIGN_OR_RETURN(inputs[name], WithRows(tensor, plan_batch));
    }
  }
  KILN_ASSIGN_OR_RETURN(auto outputs, run->Run(inputs));
  context.outputs.clear();
  for (auto& [name, tensor] : outputs) {
    KILN_ASSIGN_OR_RETURN(HostTensor dense, Dense(tensor));
    if (engine.max_batch > 0 && batch != plan_batch) {
      KILN_ASSIGN_OR_RETURN(dense, WithRows(dense, batch));
    }
    context.outputs[name] = std::move(dense);
  }
  context.batch = batch;
  context.last_run = run;
  return absl::OkStatus();
}

}  // namespace kiln::c_api
