// The gradient cases every backend is checked on (each op family's in
// tests/ops/<family>/<family>_gradient_cases.cc): one forward op with small odd-sized inputs,
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

namespace gradient_cases {

// Each op family's cases, in tests/ops/<family>/<family>_gradient_cases.cc; all of them, in this
// order, are AllGradientCases() (tests/util/all_gradient_cases.h).
std::vector<GradientCase> ConvolutionGradientCases();
std::vector<GradientCase> InnerProductGradientCases();
std::vector<GradientCase> PoolingGradientCases();
std::vector<GradientCase> LrnGradientCases();
std::vector<GradientCase> SoftmaxGradientCases();
std::vector<GradientCase> BatchNormGradientCases();
std::vector<GradientCase> ScaleBiasGradientCases();
std::vector<GradientCase> ActivationGradientCases();
std::vector<GradientCase> DropoutGradientCases();
std::vector<GradientCase> EltwiseGradientCases();
std::vector<GradientCase> TensorGradientCases();
std::vector<GradientCase> LossGradientCases();
std::vector<GradientCase> RecurrentGradientCases();
std::vector<GradientCase> EmbedGradientCases();
std::vector<GradientCase> CtcGradientCases();
std::vector<GradientCase> LstmUnitGradientCases();

// Shorthands for the tables.
using Ints = std::vector<int64_t>;
AttrValue I(int64_t v);
AttrValue Is(Ints v);
AttrValue F(double v);
AttrValue S(const char* v);
AttrValue B(bool v);
GradientCase Case(std::string name, std::string op, std::vector<Ints> dims, AttrMap attrs = {});

// Fills of fixed inputs. Integer class labels in [0, classes), one per element; every
// `ignore_every`-th set to `ignore` when ignore_every > 0.
std::function<void(HostTensor&)> Labels(int64_t classes, int ignore_every = 0, int ignore = -1);
std::function<void(HostTensor&)> Constant(float value);
// Uniform in [lo, hi), seeded by the element count (fixed inputs need no case seed).
std::function<void(HostTensor&)> Uniform(float lo, float hi);

}  // namespace gradient_cases

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
