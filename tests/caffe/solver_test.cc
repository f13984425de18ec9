// Solver files: every shared one loads (except the deliberately invalid resnet18_solver), the
// V1 enum is upgraded, nets resolve relative to the solver file, and the learning-rate policies
// follow Caffe's formulas.
#include "frontends/caffe/solver.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "frontends/caffe/caffe_io.h"
#include "gtest/gtest.h"
#include "tests/util/caffe_files.h"

namespace kiln {
namespace {

// The shared solvers name nets by Caffe-root paths ("examples/mnist/..."); this lays the net
// files out that way beside a copy of the solver so paths resolve relative to the solver file.
std::string StageSolver(const std::string& solver) {
  const std::string root = ScratchFile("caffe_root_" + solver);
  std::system(("mkdir -p " + root + "/examples/mnist " + root + "/examples/cifar10").c_str());
  const std::pair<const char*, const char*> nets[] = {
      {"lenet_train_test.prototxt", "examples/mnist/lenet_train_test.prototxt"},
      {"mnist_autoencoder.prototxt", "examples/mnist/mnist_autoencoder.prototxt"},
      {"cifar10_quick_train_test.prototxt", "examples/cifar10/cifar10_quick_train_test.prototxt"},
      {"v1_mnist_autoencoder.prototxt", "examples/mnist/v1_mnist_autoencoder.prototxt"},
  };
  for (const auto& [from, to] : nets) {
    std::ofstream(root + "/" + to) << *ReadFileBytes(CaffeFile(from));
  }
  std::string text = *ReadFileBytes(CaffeFile(solver));
  if (solver.rfind("v1_mnist_autoencoder", 0) == 0) {
    const std::string from = "examples/mnist/mnist_autoencoder.prototxt";
    const size_t at = text.find(from);
    if (at != std::string::npos) {
      text.replace(at, from.size(), "examples/mnist/v1_mnist_autoencoder.prototxt");
    }
  }
  std::ofstream(root + "/" + solver) << text;
  return root + "/" + solver;
}

TEST(SolverTest, EverySharedSolverLoads) {
  const std::pair<const char*, const char*> solvers[] = {
      {"lenet_solver.prototxt", "SGD"},
      {"lenet_multistep_solver.prototxt", "SGD"},
      {"lenet_solver_adam.prototxt", "Adam"},
      {"lenet_solver_rmsprop.prototxt", "RMSProp"},
      {"lenet_adadelta_solver.prototxt", "AdaDelta"},
      {"mnist_autoencoder_solver_nesterov.prototxt", "Nesterov"},
      {"cifar10_quick_solver.prototxt", "SGD"},
      {"v1_mnist_autoencoder_solver_adagrad.prototxt", "AdaGrad"},
      {"v1_mnist_autoencoder_solver_nesterov.prototxt", "Nesterov"},
      {"v1_lenet_consolidated_solver.prototxt", "SGD"},
  };
  for (const auto& [file, type] : solvers) {
    auto config = LoadSolver(StageSolver(file));
    ASSERT_TRUE(config.ok()) << file << ": " << config.status();
    EXPECT_EQ(config->param.type(), type) << file;
    EXPECT_FALSE(config->param.has_solver_type()) << file;
    EXPECT_EQ(config->train.state.phase(), caffe::TRAIN);
    EXPECT_GT(config->train.net.layer_size() + config->train.net.layers_size(), 0) << file;
    for (const SolverNet& test : config->tests) EXPECT_EQ(test.state.phase(), caffe::TEST);
  }
}

TEST(SolverTest, ConsolidatedSolverHasInlineNetAndTwoStagedTests) {
  auto config = LoadSolver(CaffeFile("v1_lenet_consolidated_solver.prototxt"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->train.origin, "inline net_param");
  ASSERT_EQ(config->tests.size(), 2u);
  EXPECT_EQ(config->tests[0].state.stage(0), "test-on-test-set");
  EXPECT_EQ(config->tests[1].state.stage(0), "test-on-train-set");
  EXPECT_EQ(config->tests[0].test_iter, 100);
  EXPECT_EQ(config->tests[1].test_iter, 600);
}

TEST(SolverTest, LearningRatePolicies) {
  auto lenet = LoadSolver(StageSolver("lenet_solver.prototxt"));  // inv, gamma 1e-4, power .75
  ASSERT_TRUE(lenet.ok()) << lenet.status();
  EXPECT_FLOAT_EQ(lenet->LearningRate(0), 0.01);  // base_lr is a float field
  EXPECT_NEAR(lenet->LearningRate(10000), 0.01 * std::pow(1 + 1e-4 * 10000, -0.75), 1e-8);
  auto multistep = LoadSolver(StageSolver("lenet_multistep_solver.prototxt"));
  ASSERT_TRUE(multistep.ok()) << multistep.status();
  const caffe::SolverParameter& p = multistep->param;
  ASSERT_GE(p.stepvalue_size(), 2);
  const double base = p.base_lr();
  EXPECT_DOUBLE_EQ(multistep->LearningRate(p.stepvalue(0) - 1), base);
  EXPECT_NEAR(multistep->LearningRate(p.stepvalue(0)), base * p.gamma(), 1e-9);
  EXPECT_NEAR(multistep->LearningRate(p.stepvalue(1)), base * p.gamma() * p.gamma(), 1e-9);

  caffe::SolverParameter poly;
  ASSERT_TRUE(ParseTextMessage("net_param { name: 'n' } base_lr: 0.1 lr_policy: 'poly' "
                               "power: 2 max_iter: 100",
                               "poly", poly)
                  .ok());
  auto config = ResolveSolver(poly, ".");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_NEAR(config->LearningRate(50), 0.1 * 0.25, 1e-8);
  caffe::SolverParameter step;
  ASSERT_TRUE(ParseTextMessage("net_param { name: 'n' } base_lr: 1 lr_policy: 'step' gamma: 0.5 "
                               "stepsize: 10",
                               "step", step)
                  .ok());
  config = ResolveSolver(step, ".");
  ASSERT_TRUE(config.ok());
  EXPECT_DOUBLE_EQ(config->LearningRate(9), 1.0);
  EXPECT_DOUBLE_EQ(config->LearningRate(25), 0.25);
}

TEST(SolverTest, SolverStateReads) {
  auto state = ReadSolverState(CaffeFile("v1_lenet_iter_10000.solverstate"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->iter(), 10000);
  ASSERT_EQ(state->history_size(), 8);
  int64_t values = 0;
  for (const caffe::BlobProto& blob : state->history()) values += blob.data_size();
  EXPECT_EQ(values, 431080);
}

}  // namespace
}  // namespace kiln
