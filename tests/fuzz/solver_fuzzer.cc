// Fuzz target: a text SolverParameter, upgraded and resolved (net files are looked up in a
// folder that does not exist), then its learning-rate schedule evaluated.
#include <string>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/solver.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  caffe::SolverParameter solver;
  if (!kiln::ParseTextMessage(text, "fuzz", solver).ok()) return 0;
  auto config = kiln::ResolveSolver(solver, "/nonexistent-kiln-fuzz");
  if (!config.ok()) return 0;
  for (int64_t iter : {0, 1, 1000, 1000000}) (void)config->LearningRate(iter);
  return 0;
}
