// The gradient cases every backend is checked on: one forward op with small odd-sized inputs,
// its gradient built by the op's own gradient builder (ops/gradients/) against output gradients
// fed as inputs. The reference backend is checked against finite differences
// (tests/training/gradient_check_test.cc); the CUDA backend against the reference in every
// precision (tests/kernels/cuda_gradient_test.cc).
#ifndef KILN_TESTS_UTIL_GRADIENT_CASES_H_
#define KILN_TESTS_UTIL_GRADIENT_CASES_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {
namespace testing {

struct GradientCase {
  std::string name;  // unique, for messages
  std::string op;
  std::vector<std::vector<int64_t>> input_dims;
  AttrMap attrs;
  // Inputs that get no gradient (labels, statistics, a Crop's reference), and how they are
  // filled: index -> fill(i, tensor). Other inputs hold distinct values away from every kink.
  std::map<int, std::function<void(HostTensor&)>> fixed_inputs;
  // A loss op: its scalar output is the objective, seeded with this weight (0: not a loss).
  double loss_weight = 0;
  // How many leading outputs get output gradients (-1: all). The rest are values the forward
  // keeps for its backward (AffineBatchNorm's saved statistics): compared between backends but
  // not differentiated, as no loss reads them.
  int gradient_outputs = -1;
};

// Every gradient case (every differentiable op, several attribute forms each).
std::vector<GradientCase> AllGradientCases();

// The inputs of a case (seeded), and random output gradients for each forward output that
// gets one (the case's gradient_outputs).
struct GradientInputs {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> output_grads;  // empty for a loss case
};
absl::StatusOr<GradientInputs> MakeGradientInputs(const GradientCase& c, uint32_t seed);

// A graph with Parameters "x<i>" (inputs) and "dy<j>" (output gradients), the forward node, its
// outputs "y<j>", and the gradient builder's nodes with outputs "grad<i>" for each input that
// gets a gradient. `grads` receives those input indices.
absl::StatusOr<std::unique_ptr<Graph>> BuildGradientGraph(const GradientCase& c,
                                                          const GradientInputs& in,
                                                          std::vector<int>* grads);

// The named tensors a run of that graph binds.
std::map<std::string, HostTensor> GradientBindings(const GradientInputs& in);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_GRADIENT_CASES_H_
