// Caffe solver files: the upgraded SolverParameter checked for what Caffe requires, the train and
// test nets resolved (inline, or paths relative to the solver file), and the learning-rate
// schedule as a function.
#ifndef KILN_FRONTENDS_CAFFE_SOLVER_H_
#define KILN_FRONTENDS_CAFFE_SOLVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"
#include "training/optimizer.h"

namespace kiln {

struct SolverNet {
  caffe::NetParameter net;  // as read (not yet upgraded/filtered; ImportCaffeNet does that)
  caffe::NetState state;    // phase TRAIN for the train net, TEST for test nets unless given
  std::string origin;       // the resolved file path, or "inline <field>"
  int test_iter = 0;        // test nets only
};

struct SolverConfig {
  caffe::SolverParameter param;  // upgraded: `type` set, no solver_type
  OptimizerConfig optimizer;     // the update rule and schedule `param` gives (ResolveSolver)
  SolverNet train;
  std::vector<SolverNet> tests;

  // The learning rate Caffe uses for the update at iteration `iter` (0-based).
  double LearningRate(int64_t iter) const;
};

// The optimizer a checked SolverParameter describes (its type, lr policy, hyper-parameters).
absl::StatusOr<OptimizerConfig> OptimizerFromSolver(const caffe::SolverParameter& param);

// Reads and checks a solver file. Net paths are tried relative to the solver file's folder;
// a missing net file is NotFound naming both the path written and the path tried.
absl::StatusOr<SolverConfig> LoadSolver(const std::string& path);

// Checks an already-parsed solver; `folder` resolves relative net paths.
absl::StatusOr<SolverConfig> ResolveSolver(caffe::SolverParameter param, const std::string& folder);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_SOLVER_H_
