// The graph's CUDA kernels of the neural-network families (activations, PReLU, Dropout, Pooling,
// LRN, BatchNorm, Scale, Bias, Convolution, Deconvolution, InnerProduct) against the reference,
// on the families' case tables (tests/ops/<family>/<family>_cuda_graph_test.cc, linked in):
// f32, f16 and bf16, NCHW and NHWC, odd sizes, fresh random inputs, poisoned buffers; the
// adapter families of this file also with a strided sub-region as input 0. The GPU cases skip
// without a device. The CPU tests run everywhere (CI too): every op of the families has a CUDA
// kernel, and every variant of the table is accepted and planned by it (descriptors, workspace,
// views are all plan-time work, which needs no device).
//
// Tolerances (worst |cuda - reference| / (atol + rtol |reference|) must be <= 1): f32 1e-4 +
// 1e-4 relative; f16 4e-3 + 4e-3; bf16 3e-2 + 3e-2. Both sides read the same rounded 16-bit
// inputs and round their outputs to the same dtype, so what separates them is the kernels' f32
// arithmetic (the reference's is double) and one rounding of the output.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "tests/util/cuda_graph_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {
namespace {

// The ops whose adapters live in kernels/cuda/graph/{activation,pooling,normalization}_kernels.cc.
const std::set<std::string>& AdapterOps() {
  static const auto* ops = new std::set<std::string>{
      "ReLU",  "Sigmoid", "TanH", "ELU",       "ClippedReLU", "Power", "AbsVal",
      "PReLU", "Dropout", "LRN",  "BatchNorm", "Scale",       "Bias",  "Pooling"};
  return *ops;
}

// Every family's cases, in the order their seeds follow.
const std::vector<GraphKernelCase>& Cases() {
  static const auto* cases = new std::vector<GraphKernelCase>(Concatenated({
      ActivationGraphCases(),
      DropoutGraphCases(),
      PoolingGraphCases(),
      LrnGraphCases(),
      BatchNormGraphCases(),
      ScaleBiasGraphCases(),
      ConvolutionGraphCases(),
      InnerProductGraphCases(),
      RecurrentGraphCases(),
      EmbedGraphCases(),
      ArgMaxGraphCases(),
      LstmUnitGraphCases(),
      CtcGraphCases(),
  }));
  return *cases;
}

// The variants the GPU test runs beyond the shared driver's NCHW/NHWC ones, and the CPU test
// plans: a sub-region input 0 for the adapters of this file (data of rank 2 and more).
std::vector<Variant> VariantsOf(const GraphKernelCase& c) {
  std::vector<Variant> v = {Variant::kNchw};
  bool spatial = false;
  for (const CaseInput& in : c.inputs)
    spatial = spatial || (in.kind == CaseInput::kData && IsSpatial(in));
  if (c.nhwc && spatial) v.push_back(Variant::kNhwc);
  if (AdapterOps().count(c.op) && c.inputs[0].dims.size() >= 2) v.push_back(Variant::kSubRegion);
  return v;
}

// Runs `c` with input 0 a sub-region, on CUDA and on the reference; returns 1 (one run).
int RunSubRegionCase(const GraphKernelCase& c, DataType dtype, uint32_t seed) {
  const std::string where = absl::StrCat(c.label, " ", DataTypeName(dtype), " sub-region");
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const CaseInput& in = c.inputs[i];
    inputs.push_back(RandomTensor(InputType(in, static_cast<int>(i), dtype, Variant::kSubRegion),
                                  seed + 31 * static_cast<uint32_t>(i), in.lo, in.hi));
  }
  const GraphTolerance tol = GraphToleranceFor(dtype);
  std::string kernel;
  auto ratio = CompareOutputsWithReference(c.op, inputs, c.attrs, BackendChoice::kCuda, tol.atol,
                                           tol.rtol, &kernel);
  if (!ratio.ok()) {
    ADD_FAILURE() << where << ": " << ratio.status();
    return 1;
  }
  EXPECT_EQ(kernel.rfind("cuda.", 0), 0u) << where << " ran on " << kernel;
  EXPECT_GE(*ratio, 0) << where << ": the output types differ from the reference's";
  EXPECT_LE(*ratio, 1.0) << where << ": worst error / tolerance (kernel " << kernel << ")";
  return 1;
}

TEST(CudaGraphNnTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  int ran = 0, sub_region = 0;
  uint32_t seed = 100;
  // KILN_GRAPH_CASES=a,b runs only the cases whose label contains a or b (a family's check on
  // a GPU budget); seeds stay those of the whole table.
  const char* only = std::getenv("KILN_GRAPH_CASES");
  std::vector<std::string> wanted;
  if (only != nullptr) wanted = absl::StrSplit(only, ',', absl::SkipEmpty());
  for (const GraphKernelCase& c : Cases()) {
    bool skip = only != nullptr;
    for (const std::string& w : wanted) skip = skip && !absl::StrContains(c.label, w);
    seed += 7;
    if (!skip) ran += RunGraphKernelCase(c, seed);
    for (Variant v : VariantsOf(c)) {
      if (v != Variant::kSubRegion) continue;
      for (DataType dtype : kGraphDtypes) {
        seed += 7;
        if (!skip) sub_region += RunSubRegionCase(c, dtype, seed);
      }
    }
  }
  std::printf("cuda_graph_nn_test: %d cases checked (%d with a sub-region input)\n",
              ran + sub_region, sub_region);
}

TEST(CudaGraphNnTest, EveryOpOfTheseFamiliesHasACudaKernel) {
  for (const std::string& op : AdapterOps()) {
    int cuda = 0;
    for (const KernelFactory* f : DefaultKernelRegistry().ForOp(op)) {
      if (f->key.backend != Backend::kCuda) continue;
      ++cuda;
      EXPECT_TRUE(absl::StartsWith(f->key.Name(), "cuda.")) << f->key.Name();
    }
    EXPECT_GE(cuda, 1) << op << " has no CUDA kernel";
  }
  for (const GraphKernelCase& c : Cases()) EXPECT_TRUE(HasCudaKernel(c.op)) << c.op;
}

// Kernel selection and plan-time preparation need no device: every variant the GPU test runs is
// accepted by a CUDA kernel of this file's adapters and prepared (descriptors, workspace size,
// views) here, so a refusal or a plan-time error shows in CI.
TEST(CudaGraphNnTest, EveryVariantIsSelectedAndPreparedWithoutADevice) {
  int planned = 0;
  for (const GraphKernelCase& c : Cases()) {
    const bool own_kernels = c.op == "RNN" || c.op == "RNNGradient" || c.op == "Embed" ||
                             c.op == "EmbedGradient" || c.op == "ArgMax" || c.op == "LSTMUnit" ||
                             c.op == "LSTMUnitGradient" || c.op == "CTCLoss" ||
                             c.op == "CTCLossGradient";
    if (!AdapterOps().count(c.op) && !own_kernels) continue;
    for (DataType dtype : kGraphDtypes) {
      for (Variant v : VariantsOf(c)) {
        const std::string where =
            absl::StrCat(c.label, " ", DataTypeName(dtype), " ", VariantName(v));
        std::vector<TensorType> types;
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          types.push_back(InputType(c.inputs[i], static_cast<int>(i), dtype, v));
        }
        const Node* node = nullptr;
        std::string error;
        auto graph = OneNodeGraph(c, types, &node, &error);
        ASSERT_NE(graph, nullptr) << where << ": " << error;
        auto factory = DefaultKernelRegistry().Select(*node, Backend::kCuda);
        ASSERT_TRUE(factory.ok()) << where << ": " << factory.status();
        EXPECT_TRUE(absl::StartsWith((*factory)->key.Name(), "cuda.")) << where;
        auto kernel = CreateKernel(**factory, *node, KernelOptions());
        ASSERT_TRUE(kernel.ok()) << where << ": " << kernel.status();
        ++planned;
      }
    }
  }
  std::printf("cuda_graph_nn_test: %d variants planned\n", planned);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
