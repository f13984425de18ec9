// Training through the C API (include/kiln/kiln.h, "Training with a Caffe solver"): the
// SolverTrainer `kiln train` uses, stepped by the caller.
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/api_state.h"
#include "base/json_text.h"
#include "frontends/caffe/caffe_io.h"

using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

namespace {

// kiln_trainer_create and kiln_trainer_from_solver: errors start with `where`, the caller's call.
kiln_status CreateTrainer(const char* where, const char* solver,
                          const kiln_trainer_options* options, kiln_trainer** trainer) {
  return Guarded(where, [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(solver, where, "solver"));
    KILN_RETURN_IF_ERROR(NotNull(trainer, where, "trainer"));
    *trainer = nullptr;
    kiln_trainer_options given;
    kiln_trainer_options_init(&given);
    if (options != nullptr) {
      if (options->struct_size < offsetof(kiln_trainer_options, solver_type) + sizeof(void*) ||
          options->struct_size > sizeof(kiln_trainer_options)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": options->struct_size ", options->struct_size,
            " (set it with kiln_trainer_options_init, or to sizeof(kiln_trainer_options))"));
      }
      std::memcpy(&given, options, options->struct_size);
    }
    KILN_ASSIGN_OR_RETURN(kiln::CompileOptions compile,
                          kiln::c_api::ToCompileOptions(given.compile, where));
    if (given.compile != nullptr && given.compile->batch > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": options->batch does not apply: the solver's net sets the batch"));
    }
    // The training graph rewrites are the trainer's own choice (TrainingOptions::compile).
    compile.optimize = false;
    auto made = std::make_unique<kiln_trainer>();
    KILN_ASSIGN_OR_RETURN(caffe::SolverParameter param, kiln::ReadSolverParameter(solver));
    if (given.solver_type != nullptr) {
      param.set_type(given.solver_type);
      param.clear_solver_type();
    }
    const std::filesystem::path folder = std::filesystem::path(solver).parent_path();
    KILN_ASSIGN_OR_RETURN(made->solver,
                          kiln::ResolveSolver(param, folder.empty() ? "." : folder.string()));
    kiln::TrainerOptions train;
    train.compile = compile;
    train.solver_dir = folder.string();
    if (given.caffemodel != nullptr) {
      KILN_ASSIGN_OR_RETURN(made->initial_weights, kiln::ReadNetParameter(given.caffemodel));
      train.weights = &made->initial_weights;
    }
    const caffe::SolverParameter& p = made->solver.param;
    made->snapshot_prefix = p.snapshot_prefix().empty()
                                ? std::filesystem::path(solver).replace_extension().string()
                                : p.snapshot_prefix();
    KILN_ASSIGN_OR_RETURN(made->trainer, kiln::SolverTrainer::Create(made->solver, train));
    made->params = made->trainer->ParamBlobs();
    *trainer = made.release();
    return absl::OkStatus();
  });
}

}  // namespace

extern "C" {

void kiln_trainer_options_init(kiln_trainer_options* options) {
  if (options == nullptr) return;
  *options = kiln_trainer_options{};
  options->struct_size = sizeof(kiln_trainer_options);
}

kiln_status kiln_trainer_create(const char* solver, const kiln_trainer_options* options,
                                kiln_trainer** trainer) {
  return CreateTrainer("kiln_trainer_create", solver, options, trainer);
}

kiln_status kiln_trainer_from_solver(const char* solver, const char* caffemodel,
                                     const kiln_compile_options* options, kiln_trainer** trainer) {
  kiln_trainer_options given;
  kiln_trainer_options_init(&given);
  given.caffemodel = caffemodel;
  given.compile = options;
  return CreateTrainer("kiln_trainer_from_solver", solver, &given, trainer);
}

void kiln_trainer_destroy(kiln_trainer* trainer) { delete trainer; }

kiln_status kiln_trainer_step(kiln_trainer* trainer, int iterations) {
  return Guarded("kiln_trainer_step", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(trainer, "kiln_trainer_step", "trainer"));
    if (iterations < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kiln_trainer_step: iterations ", iterations, " (0 or more)"));
    }
    for (int i = 0; i < iterations; ++i) {
      absl::Status step = trainer->trainer->Step();
      if (!step.ok()) {
        return absl::Status(step.code(),
                            absl::StrCat("kiln_trainer_step: iteration ", trainer->trainer->iter(),
                                         ": ", step.message()));
      }
    }
    return absl::OkStatus();
  });
}

int64_t kiln_trainer_iteration(const kiln_trainer* trainer) {
  return trainer ? trainer->trainer->iter() : 0;
}

double kiln_trainer_loss(const kiln_trainer* trainer) {
  return trainer ? trainer->trainer->last_loss() : 0.0;
}

kiln_status kiln_trainer_snapshot(kiln_trainer* trainer, const char* prefix) {
  return Guarded("kiln_trainer_snapshot", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(trainer, "kiln_trainer_snapshot", "trainer"));
    return trainer->trainer->Snapshot(prefix ? prefix : trainer->snapshot_prefix).status();
  });
}

kiln_status kiln_trainer_restore(kiln_trainer* trainer, const char* solverstate) {
  return Guarded("kiln_trainer_restore", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(trainer, "kiln_trainer_restore", "trainer"));
    KILN_RETURN_IF_ERROR(NotNull(solverstate, "kiln_trainer_restore", "solverstate"));
    return trainer->trainer->Restore(solverstate);
  });
}

const char* kiln_trainer_solver_json(const kiln_trainer* trainer) {
  if (trainer == nullptr) {
    kiln::c_api::Report(absl::InvalidArgumentError("kiln_trainer_solver_json: `trainer` is NULL"));
    return "";
  }
  const caffe::SolverParameter& p = trainer->solver.param;
  std::string tests;
  for (const kiln::SolverNet& t : trainer->solver.tests)
    absl::StrAppend(&tests, tests.empty() ? "" : ", ", t.test_iter);
  trainer->text =
      absl::StrCat("{\"type\": ", kiln::JsonString(p.type()), ", \"base_lr\": ", p.base_lr(),
                   ", \"max_iter\": ", p.max_iter(), ", \"display\": ", p.display(),
                   ", \"average_loss\": ", p.average_loss(),
                   ", \"test_interval\": ", p.test_interval(), ", \"test_iter\": [", tests,
                   "], \"test_initialization\": ", p.test_initialization() ? "true" : "false",
                   ", \"snapshot\": ", p.snapshot(),
                   ", \"snapshot_prefix\": ", kiln::JsonString(trainer->snapshot_prefix),
                   ", \"iter_size\": ", p.iter_size(), "}");
  return trainer->text.c_str();
}

int kiln_trainer_num_test_nets(const kiln_trainer* trainer) {
  return trainer ? trainer->trainer->num_test_nets() : 0;
}

kiln_status kiln_trainer_test(kiln_trainer* trainer, int net, const char** json) {
  return Guarded("kiln_trainer_test", [&]() -> absl::Status {
    const char* where = "kiln_trainer_test";
    KILN_RETURN_IF_ERROR(NotNull(trainer, where, "trainer"));
    KILN_RETURN_IF_ERROR(NotNull(json, where, "json"));
    *json = "";
    if (net < 0 || net >= trainer->trainer->num_test_nets()) {
      return absl::OutOfRangeError(absl::StrCat(where, ": test net ", net, " (the solver has ",
                                                trainer->trainer->num_test_nets(), ")"));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::NetOutput> outputs, trainer->trainer->Test(net));
    std::string text = "{";
    for (const kiln::NetOutput& o : outputs) {
      absl::StrAppend(&text, text.size() > 1 ? ", " : "", kiln::JsonString(o.name), ": ",
                      kiln::JsonNumber(o.value));
    }
    trainer->text = text + "}";
    *json = trainer->text.c_str();
    return absl::OkStatus();
  });
}

int kiln_trainer_num_params(const kiln_trainer* trainer) {
  return trainer ? static_cast<int>(trainer->params.size()) : 0;
}

namespace {

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The trainer's parameter `index`; with `count` >= 0, also checks that the caller's buffer
// (`data`, not NULL) holds exactly its values.
absl::StatusOr<const kiln::SolverTrainer::ParamBlob*> TrainerParam(const kiln_trainer* trainer,
                                                                   int index, const char* where,
                                                                   const void* data = nullptr,
                                                                   int64_t count = -1) {
  KILN_RETURN_IF_ERROR(NotNull(trainer, where, "trainer"));
  if (index < 0 || index >= static_cast<int>(trainer->params.size())) {
    return absl::OutOfRangeError(
        absl::StrCat(where, ": parameter ", index, " (the net has ", trainer->params.size(), ")"));
  }
  const kiln::SolverTrainer::ParamBlob* p = &trainer->params[index];
  if (count >= 0) {
    KILN_RETURN_IF_ERROR(NotNull(data, where, "data"));
    if (count != Count(p->shape)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": count ", count, "; layer '",
                                                     p->layer, "' blob ", p->index, " has ",
                                                     Count(p->shape)));
    }
  }
  return p;
}

}  // namespace

kiln_status kiln_trainer_param(const kiln_trainer* trainer, int index, kiln_blob_info* info) {
  return Guarded("kiln_trainer_param", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(info, "kiln_trainer_param", "info"));
    KILN_ASSIGN_OR_RETURN(const kiln::SolverTrainer::ParamBlob* p,
                          TrainerParam(trainer, index, "kiln_trainer_param"));
    return kiln::c_api::DescribeBlob(p->layer, p->index, p->shape, nullptr, nullptr, *info,
                                     "kiln_trainer_param");
  });
}

kiln_status kiln_trainer_get_param(const kiln_trainer* trainer, int index, float* data,
                                   size_t count) {
  return Guarded("kiln_trainer_get_param", [&]() -> absl::Status {
    KILN_ASSIGN_OR_RETURN(
        const kiln::SolverTrainer::ParamBlob* p,
        TrainerParam(trainer, index, "kiln_trainer_get_param", data, static_cast<int64_t>(count)));
    KILN_ASSIGN_OR_RETURN(std::vector<float> values, trainer->trainer->ReadParam(p->node));
    std::memcpy(data, values.data(), count * sizeof(float));
    return absl::OkStatus();
  });
}

kiln_status kiln_trainer_set_param(kiln_trainer* trainer, int index, const float* data,
                                   size_t count) {
  return Guarded("kiln_trainer_set_param", [&]() -> absl::Status {
    const char* where = "kiln_trainer_set_param";
    KILN_ASSIGN_OR_RETURN(const kiln::SolverTrainer::ParamBlob* p,
                          TrainerParam(trainer, index, where, data, static_cast<int64_t>(count)));
    absl::Status written =
        trainer->trainer->WriteParam(p->node, std::vector<float>(data, data + count));
    if (!written.ok()) {
      return absl::Status(written.code(), absl::StrCat(where, ": layer '", p->layer, "' blob ",
                                                       p->index, ": ", written.message()));
    }
    return absl::OkStatus();
  });
}

}  // extern "C"
