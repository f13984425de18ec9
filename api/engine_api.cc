// Engines and contexts of the C API (include/kiln/kiln.h): a compiled plan whose weights are
// uploaded once (PlanWeights) and shared by every context made from it; each context has its
// own activations and, on CUDA, its own stream.
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/api_state.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/plan_layers.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/plan_file.h"

namespace kiln::c_api {
namespace {

absl::StatusOr<std::vector<TensorPort>> Ports(const ExecutionPlan& plan,
                                              const std::map<std::string, int>& named) {
  std::vector<TensorPort> ports;
  ports.reserve(named.size());
  for (const auto& [name, buffer] : named) {
    TensorPort port;
    port.name = name;
    port.buffer = buffer;
    port.type = plan.buffers()[buffer].type;
    ports.push_back(std::move(port));
  }
  for (TensorPort& port : ports) {  // after the vector stops moving: info.name points into it
    KILN_ASSIGN_OR_RETURN(port.info.dtype, FromDataType(port.type.dtype()));
    port.info.name = port.name.c_str();
    port.info.rank = port.type.rank();
    for (int i = 0; i < port.type.rank(); ++i) port.info.dims[i] = port.type.dim(i);
    port.info.bytes =
        static_cast<size_t>(port.type.num_elements()) * DataTypeSize(port.type.dtype());
  }
  return ports;
}

const TensorPort* FindPort(const std::vector<TensorPort>& ports, absl::string_view name) {
  for (const TensorPort& p : ports) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string PortNames(const std::vector<TensorPort>& ports) {
  std::string names;
  for (const TensorPort& p : ports)
    absl::StrAppend(&names, names.empty() ? "" : ", ", "'", p.name, "'");
  return names.empty() ? "none" : names;
}

}  // namespace

absl::StatusOr<std::shared_ptr<EngineState>> MakeEngine(const Graph& graph,
                                                        const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                        Compile(graph, DefaultKernelRegistry(), options));
  return MakeEngineFromPlan(graph.Clone(), options, std::move(plan));
}

absl::StatusOr<std::shared_ptr<EngineState>> MakeEngineFromPlan(
    std::unique_ptr<Graph> source, const CompileOptions& options,
    std::unique_ptr<ExecutionPlan> compiled) {
  auto state = std::make_shared<EngineState>();
  state->source = std::move(source);
  state->options = options;
  state->plan = std::move(compiled);
  KILN_ASSIGN_OR_RETURN(state->weights, PlanWeights::Upload(*state->plan));
  KILN_ASSIGN_OR_RETURN(state->inputs, Ports(*state->plan, state->plan->inputs()));
  KILN_ASSIGN_OR_RETURN(state->outputs, Ports(*state->plan, state->plan->outputs()));
  const ExecutionPlan& plan = *state->plan;
  state->description = absl::StrFormat(
      "backend %s (%s), precision %s, layout %s, %d steps, weights %.1f MiB, per context "
      "%.1f MiB",
      std::string(BackendName(plan.backend())), plan.backend_reason(), plan.precision(),
      plan.layout(), static_cast<int>(plan.steps().size()), plan.weights_bytes() / 1048576.0,
      (plan.activations_bytes() + plan.workspace_bytes()) / 1048576.0);
  return state;
}

}  // namespace kiln::c_api

using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

extern "C" {

kiln_status kiln_engine_from_caffe(const char* prototxt, const char* caffemodel,
                                   const kiln_compile_options* options, kiln_engine** engine) {
  return Guarded("kiln_engine_from_caffe", [&]() -> absl::Status {
    const char* where = "kiln_engine_from_caffe";
    KILN_RETURN_IF_ERROR(NotNull(prototxt, where, "prototxt"));
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    *engine = nullptr;
    KILN_ASSIGN_OR_RETURN(kiln::CompileOptions compile,
                          kiln::c_api::ToCompileOptions(options, where));
    KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, kiln::ReadNetParameter(prototxt));
    kiln::CaffeImportOptions import;
    caffe::NetParameter weights;
    if (caffemodel != nullptr) {
      KILN_ASSIGN_OR_RETURN(weights, kiln::ReadNetParameter(caffemodel));
      import.weights = &weights;
    }
    // Without weights only a net with no learnable blob is accepted: random filler weights
    // would give answers that look real.
    import.init = kiln::ParamInit::kZeros;
    // Import errors name the call and the file ("import: layer 'conv1' ..." alone does not).
    const std::string named = absl::StrCat(where, ": ", prototxt);
    // The model at a batch size (0: the file's), its weights checked.
    auto import_at = [&](int64_t batch) -> absl::StatusOr<kiln::CaffeModel> {
      kiln::CaffeImportOptions at = import;
      if (batch > 0) {
        absl::StatusOr<kiln::CaffeModel> probe =
            kiln::ImportCaffeNet(net, import, kiln::DefaultOpRegistry());
        if (!probe.ok()) return kiln::Annotate(probe.status(), named);
        for (const kiln::CaffeInput& input : probe->inputs) {
          std::vector<int64_t> dims = input.dims;
          if (!dims.empty()) dims[0] = batch;
          at.input_shapes[input.name] = dims;
        }
      }
      absl::StatusOr<kiln::CaffeModel> model =
          kiln::ImportCaffeNet(net, at, kiln::DefaultOpRegistry());
      if (!model.ok()) return kiln::Annotate(model.status(), named);
      for (const kiln::CaffeParam& param : model->params) {
        if (param.source != "zeros") continue;
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": layer '", param.layer, "' blob ", param.index, " has no weights ",
            caffemodel == nullptr ? "(no .caffemodel was given)"
                                  : absl::StrCat("in ", caffemodel, " or ", prototxt),
            "; give the .caffemodel trained for this net"));
      }
      return model;
    };
    const int64_t batch = options != nullptr ? options->batch : 0;
    // The struct of a caller built against an older header may end before max_batch.
    const int64_t max_batch =
        options != nullptr && options->struct_size >= offsetof(kiln_compile_options, max_batch) +
                                                          sizeof(options->max_batch)
            ? options->max_batch
            : 0;
    KILN_ASSIGN_OR_RETURN(kiln::CaffeModel model, import_at(max_batch > 0 ? max_batch : batch));
    KILN_ASSIGN_OR_RETURN(auto state, kiln::c_api::MakeEngine(*model.graph, compile));
    state->source_files.push_back(prototxt);
    if (caffemodel != nullptr) state->source_files.push_back(caffemodel);
    // The reports name the prototxt's layers and compare with what Caffe allocates.
    state->layers = kiln::CaffeLayerIndex(model);
    state->naive_activation_bytes = kiln::CaffeActivationBytes(model);
    if (max_batch > 0) {
      for (const kiln::c_api::TensorPort& port : state->inputs) {
        if (port.type.rank() == 0 || port.type.dim(0) != max_batch) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": options->max_batch needs every input's first dim to be the batch; '",
              port.name, "' is ", port.type.ToString()));
        }
      }
      state->max_batch = max_batch;
      for (int64_t b = 1; b < max_batch; b *= 2) {
        KILN_ASSIGN_OR_RETURN(kiln::CaffeModel smaller, import_at(b));
        KILN_RETURN_IF_ERROR(kiln::c_api::AddBatchProfile(*state, *smaller.graph, b));
      }
      int copies = 1;
      for (const kiln::c_api::BatchProfile& p : state->smaller) {
        if (p.weights != state->weights) ++copies;
      }
      absl::StrAppend(&state->description, "; variable batch 1 to ", max_batch, " (",
                      state->smaller.size() + 1, " plans, the weights held ",
                      copies == 1 ? "once" : absl::StrCat(copies, " times"), ")");
    }
    *engine = new kiln_engine{std::move(state)};
    return absl::OkStatus();
  });
}

kiln_status kiln_engine_from_graph(const kiln_graph* graph, const kiln_compile_options* options,
                                   kiln_engine** engine) {
  return Guarded("kiln_engine_from_graph", [&]() -> absl::Status {
    const char* where = "kiln_engine_from_graph";
    KILN_RETURN_IF_ERROR(NotNull(graph, where, "graph"));
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    *engine = nullptr;
    KILN_ASSIGN_OR_RETURN(kiln::CompileOptions compile,
                          kiln::c_api::ToCompileOptions(options, where));
    if (options != nullptr && options->batch > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": options->batch applies to Caffe models; a built graph has its inputs' dims"));
    }
    KILN_ASSIGN_OR_RETURN(auto state, kiln::c_api::MakeEngine(graph->builder->graph(), compile));
    *engine = new kiln_engine{std::move(state)};
    return absl::OkStatus();
  });
}

void kiln_engine_destroy(kiln_engine* engine) { delete engine; }

kiln_status kiln_engine_save(const kiln_engine* engine, const char* path, int overwrite) {
  return Guarded("kiln_engine_save", [&]() -> absl::Status {
    const char* where = "kiln_engine_save";
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    KILN_RETURN_IF_ERROR(NotNull(path, where, "path"));
    const kiln::c_api::EngineState& s = *engine->state;
    if (s.max_batch > 0) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": a variable-batch engine (max_batch ", s.max_batch,
                       ") cannot be saved yet; save one compiled for a fixed batch"));
    }
    std::vector<kiln::FlagPath> sources;
    for (const std::string& file : s.source_files) sources.push_back({"the model's files", file});
    absl::Status writable = kiln::CheckOutputFiles(
        sources, {{"path", path}},
        overwrite ? kiln::ExistingOutput::kReplace : kiln::ExistingOutput::kRefuse,
        "overwrite = 1");
    if (!writable.ok()) return kiln::Annotate(writable, where);
    absl::StatusOr<std::string> bytes = kiln::SerializePlan(*s.source, s.options, *s.plan);
    if (!bytes.ok()) return kiln::Annotate(bytes.status(), where);
    return kiln::Annotate(kiln::WriteFileBytes(path, *bytes), where);
  });
}

kiln_status kiln_engine_load(const char* path, const kiln_compile_options* options,
                             kiln_engine** engine) {
  return Guarded("kiln_engine_load", [&]() -> absl::Status {
    const char* where = "kiln_engine_load";
    KILN_RETURN_IF_ERROR(NotNull(path, where, "path"));
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    *engine = nullptr;
    // Only the device is taken from the options: the rest is the plan's.
    int cuda_device = -1;
    if (options != nullptr && options->device != nullptr &&
        std::string(options->device) != "auto") {
      kiln::CompileOptions device;
      absl::Status parsed = kiln::ParseDeviceChoice(options->device, device);
      if (!parsed.ok()) return kiln::Annotate(parsed, where);
      if (device.backend == kiln::BackendChoice::kCuda) cuda_device = device.cuda_device;
    }
    absl::StatusOr<std::string> bytes = kiln::ReadFileBytes(path);
    if (!bytes.ok()) return kiln::Annotate(bytes.status(), where);
    absl::StatusOr<kiln::LoadedPlan> loaded = kiln::LoadPlan(
        *bytes, path, kiln::DefaultOpRegistry(), kiln::DefaultKernelRegistry(), cuda_device);
    if (!loaded.ok()) return kiln::Annotate(loaded.status(), where);
    KILN_ASSIGN_OR_RETURN(
        auto state, kiln::c_api::MakeEngineFromPlan(std::move(loaded->source), loaded->options,
                                                    std::move(loaded->plan)));
    *engine = new kiln_engine{std::move(state)};
    return absl::OkStatus();
  });
}

int kiln_engine_num_inputs(const kiln_engine* engine) {
  return engine ? static_cast<int>(engine->state->inputs.size()) : 0;
}

int kiln_engine_num_outputs(const kiln_engine* engine) {
  return engine ? static_cast<int>(engine->state->outputs.size()) : 0;
}

static kiln_status PortInfo(const kiln_engine* engine, int index, kiln_tensor_info* info,
                            bool input) {
  const char* where = input ? "kiln_engine_input" : "kiln_engine_output";
  return Guarded(where, [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    KILN_RETURN_IF_ERROR(NotNull(info, where, "info"));
    const auto& ports = input ? engine->state->inputs : engine->state->outputs;
    if (index < 0 || static_cast<size_t>(index) >= ports.size()) {
      return absl::OutOfRangeError(
          absl::StrCat(where, ": index ", index, " (the engine has ", ports.size(), ")"));
    }
    *info = ports[index].info;
    return absl::OkStatus();
  });
}

kiln_status kiln_engine_input(const kiln_engine* engine, int index, kiln_tensor_info* info) {
  return PortInfo(engine, index, info, true);
}

kiln_status kiln_engine_output(const kiln_engine* engine, int index, kiln_tensor_info* info) {
  return PortInfo(engine, index, info, false);
}

const char* kiln_engine_describe(const kiln_engine* engine) {
  return engine ? engine->state->description.c_str() : "";
}

int kiln_engine_cuda_device(const kiln_engine* engine) {
  if (engine == nullptr || engine->state->plan->backend() != kiln::Backend::kCuda) return -1;
  return engine->state->plan->cuda_device();
}

int64_t kiln_engine_weights_bytes(const kiln_engine* engine) {
  return engine ? engine->state->plan->weights_bytes() : 0;
}

int64_t kiln_engine_max_batch(const kiln_engine* engine) {
  return engine ? engine->state->max_batch : 0;
}

int64_t kiln_context_batch(const kiln_context* context) { return context ? context->batch : 0; }

int64_t kiln_engine_context_bytes(const kiln_engine* engine) {
  if (engine == nullptr) return 0;
  return engine->state->plan->activations_bytes() + engine->state->plan->workspace_bytes();
}

kiln_status kiln_context_create(kiln_engine* engine, kiln_context** context) {
  return Guarded("kiln_context_create", [&]() -> absl::Status {
    const char* where = "kiln_context_create";
    KILN_RETURN_IF_ERROR(NotNull(engine, where, "engine"));
    KILN_RETURN_IF_ERROR(NotNull(context, where, "context"));
    *context = nullptr;
    kiln::ContextOptions options;
    options.weights = engine->state->weights;
    auto made = std::make_unique<kiln_context>();
    made->engine = engine->state;
    KILN_ASSIGN_OR_RETURN(made->context,
                          kiln::ExecutionContext::Create(*engine->state->plan, options));
    *context = made.release();
    return absl::OkStatus();
  });
}

void kiln_context_destroy(kiln_context* context) { delete context; }

kiln_status kiln_context_set_input(kiln_context* context, const char* name, const void* data,
                                   size_t bytes) {
  return Guarded("kiln_context_set_input", [&]() -> absl::Status {
    const char* where = "kiln_context_set_input";
    KILN_RETURN_IF_ERROR(NotNull(context, where, "context"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    KILN_RETURN_IF_ERROR(NotNull(data, where, "data"));
    const kiln::c_api::TensorPort* port = kiln::c_api::FindPort(context->engine->inputs, name);
    if (port == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          where, ": '", name,
          "' is not an input (inputs: ", kiln::c_api::PortNames(context->engine->inputs), ")"));
    }
    std::vector<int64_t> dims = port->type.dims();
    const int64_t max_batch = context->engine->max_batch;
    if (max_batch > 0) {
      // Any whole number of rows from 1 to max_batch.
      const size_t row = port->info.bytes / static_cast<size_t>(max_batch);
      if (row == 0 || bytes % row != 0 || bytes / row < 1 ||
          bytes / row > static_cast<size_t>(max_batch)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " '", name, "': ", bytes, " bytes given; the input takes 1 to ", max_batch,
            " rows of ", row, " bytes (", port->type.ToString(), " at the largest batch)"));
      }
      dims[0] = static_cast<int64_t>(bytes / row);
    } else if (bytes != port->info.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " '", name, "': ", bytes, " bytes given, the input ",
                       port->type.ToString(), " has ", port->info.bytes));
    }
    KILN_ASSIGN_OR_RETURN(kiln::TensorType dense,
                          kiln::TensorType::Create(port->type.dtype(), dims));
    kiln::HostTensor tensor(dense);
    std::memcpy(tensor.data(), data, bytes);
    context->inputs[name] = std::move(tensor);
    return absl::OkStatus();
  });
}

kiln_status kiln_context_run(kiln_context* context) {
  return Guarded("kiln_context_run", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(context, "kiln_context_run", "context"));
    return kiln::c_api::RunContext(*context);
  });
}

kiln_status kiln_context_get_output(const kiln_context* context, const char* name, void* data,
                                    size_t bytes) {
  return Guarded("kiln_context_get_output", [&]() -> absl::Status {
    const char* where = "kiln_context_get_output";
    KILN_RETURN_IF_ERROR(NotNull(context, where, "context"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    KILN_RETURN_IF_ERROR(NotNull(data, where, "data"));
    const kiln::c_api::TensorPort* port = kiln::c_api::FindPort(context->engine->outputs, name);
    if (port == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          where, ": '", name,
          "' is not an output (outputs: ", kiln::c_api::PortNames(context->engine->outputs), ")"));
    }
    auto it = context->outputs.find(name);
    if (it == context->outputs.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " '", name, "': no run has finished yet (kiln_context_run)"));
    }
    const kiln::HostTensor& out = it->second;  // dense (RunContext), at the run's batch
    if (bytes != static_cast<size_t>(out.size_bytes())) {
      return absl::InvalidArgumentError(absl::StrCat(where, " '", name, "': room for ", bytes,
                                                     " bytes, the output ", out.type().ToString(),
                                                     " of the last run has ", out.size_bytes()));
    }
    std::memcpy(data, out.data(), bytes);
    return absl::OkStatus();
  });
}

kiln_status kiln_context_run_device(kiln_context* context, int num_inputs,
                                    const char* const* input_names, const void* const* inputs,
                                    int num_outputs, const char* const* output_names,
                                    void* const* outputs, void* cuda_stream) {
  return Guarded("kiln_context_run_device", [&]() -> absl::Status {
    const char* where = "kiln_context_run_device";
    KILN_RETURN_IF_ERROR(NotNull(context, where, "context"));
    if (num_inputs < 0 || num_outputs < 0 ||
        (num_inputs > 0 && (input_names == nullptr || inputs == nullptr)) ||
        (num_outputs > 0 && (output_names == nullptr || outputs == nullptr))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the name and pointer arrays must hold num_inputs (", num_inputs,
                       ") and num_outputs (", num_outputs, ") entries"));
    }
    // The C API promises dense row-major buffers: refuse a port the plan keeps otherwise.
    for (const auto* ports : {&context->engine->inputs, &context->engine->outputs}) {
      for (const kiln::c_api::TensorPort& port : *ports) {
        if (!port.type.IsContiguous()) {
          return absl::UnimplementedError(
              absl::StrCat(where, ": '", port.name, "' is ", port.type.ToString(),
                           " in this plan, not dense row-major; use kiln_context_set_input/run"));
        }
      }
    }
    std::map<std::string, const void*> in;
    std::map<std::string, void*> out;
    for (int i = 0; i < num_inputs; ++i) {
      KILN_RETURN_IF_ERROR(NotNull(input_names[i], where, "an input name"));
      in[input_names[i]] = inputs[i];
    }
    for (int i = 0; i < num_outputs; ++i) {
      KILN_RETURN_IF_ERROR(NotNull(output_names[i], where, "an output name"));
      out[output_names[i]] = outputs[i];
    }
    absl::Status s = context->context->RunOnStream(in, out, cuda_stream);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
    return absl::OkStatus();
  });
}

kiln_status kiln_context_synchronize(kiln_context* context) {
  return Guarded("kiln_context_synchronize", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(context, "kiln_context_synchronize", "context"));
    return context->context->Synchronize();
  });
}

}  // extern "C"
