// Training through the C API (include/kiln/kiln.h, "Training with a Caffe solver"): the
// SolverTrainer `kiln train` uses, stepped by the caller.
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/api_state.h"
#include "frontends/caffe/caffe_io.h"

using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

extern "C" {

kiln_status kiln_trainer_from_solver(const char* solver, const char* caffemodel,
                                     const kiln_compile_options* options, kiln_trainer** trainer) {
  return Guarded("kiln_trainer_from_solver", [&]() -> absl::Status {
    const char* where = "kiln_trainer_from_solver";
    KILN_RETURN_IF_ERROR(NotNull(solver, where, "solver"));
    KILN_RETURN_IF_ERROR(NotNull(trainer, where, "trainer"));
    *trainer = nullptr;
    KILN_ASSIGN_OR_RETURN(kiln::CompileOptions compile,
                          kiln::c_api::ToCompileOptions(options, where));
    if (options != nullptr && options->batch > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": options->batch does not apply: the solver's net sets the batch"));
    }
    // The training graph rewrites are the trainer's own choice (TrainingOptions::compile).
    compile.optimize = false;
    auto made = std::make_unique<kiln_trainer>();
    KILN_ASSIGN_OR_RETURN(made->solver, kiln::LoadSolver(solver));
    kiln::TrainerOptions train;
    train.compile = compile;
    train.solver_dir = std::filesystem::path(solver).parent_path().string();
    if (caffemodel != nullptr) {
      KILN_ASSIGN_OR_RETURN(made->initial_weights, kiln::ReadNetParameter(caffemodel));
      train.weights = &made->initial_weights;
    }
    const caffe::SolverParameter& p = made->solver.param;
    made->snapshot_prefix = p.snapshot_prefix().empty()
                                ? std::filesystem::path(solver).replace_extension().string()
                                : p.snapshot_prefix();
    KILN_ASSIGN_OR_RETURN(made->trainer, kiln::SolverTrainer::Create(made->solver, train));
    *trainer = made.release();
    return absl::OkStatus();
  });
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

}  // extern "C"
