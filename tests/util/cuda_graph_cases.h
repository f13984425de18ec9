// Shared driver of the graph CUDA kernel tests: each case is an op, its inputs and attributes;
// the driver runs it in f32, f16 and bf16, in NCHW and (for 4-d data) NHWC, on CUDA and on the
// reference backend with fresh random inputs and poisoned buffers, and checks every output.
#ifndef KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_
#define KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {
namespace testing {

// One input of a case.
struct CaseInput {
  std::vector<int64_t> dims;
  // Data follow the plan's dtype and layout; parameters stay f32 row-major (as the compiler
  // keeps BatchNorm/Scale/PReLU parameters); labels are f32 integers in [0, label_classes).
  enum Kind { kData, kParameter, kLabels } kind = kData;
  float lo = -1.0f, hi = 1.0f;  // the uniform range of random values
  int64_t label_classes = 0;
  int64_t ignored_label = -1;  // one label in every few set to this, when >= 0
  // kLabels only: these values instead of random labels (indices whose combinations must make
  // sense together, as CTC's labels and lengths).
  std::vector<float> values;
};

// Shorthands for the case tables.
CaseInput Data(std::vector<int64_t> dims, float lo = -1, float hi = 1);
CaseInput Param(std::vector<int64_t> dims, float lo = -1, float hi = 1);
CaseInput Labels(std::vector<int64_t> dims, int64_t classes, int64_t ignored = -1);
// f32 index values given in row-major order (a label input with fixed contents).
CaseInput Fixed(std::vector<int64_t> dims, std::vector<float> values);
AttrValue Str(const char* s);

struct GraphKernelCase {
  std::string label;
  std::string op;
  std::vector<CaseInput> inputs;
  AttrMap attrs;
  bool nhwc = true;  // also run with channels-last 4-d data
  // Looser tolerances for reductions over many 16-bit terms (a loss), as a multiple.
  double tolerance_scale = 1.0;
};

// Each op family's cases, in tests/ops/<family>/<family>_cuda_graph_test.cc. The neural-network
// families' run in //tests/kernels:cuda_graph_nn_test, in this order (each case's seed follows
// it), the others' in //tests/kernels:cuda_graph_tensor_test.
std::vector<GraphKernelCase> ActivationGraphCases();
std::vector<GraphKernelCase> DropoutGraphCases();
std::vector<GraphKernelCase> PoolingGraphCases();
std::vector<GraphKernelCase> LrnGraphCases();
std::vector<GraphKernelCase> BatchNormGraphCases();
std::vector<GraphKernelCase> ScaleBiasGraphCases();
std::vector<GraphKernelCase> ConvolutionGraphCases();
std::vector<GraphKernelCase> InnerProductGraphCases();
std::vector<GraphKernelCase> SoftmaxGraphCases();
std::vector<GraphKernelCase> TensorGraphCases();
std::vector<GraphKernelCase> EltwiseGraphCases();
std::vector<GraphKernelCase> LossGraphCases();
std::vector<GraphKernelCase> RecurrentGraphCases();
std::vector<GraphKernelCase> EmbedGraphCases();
std::vector<GraphKernelCase> ArgMaxGraphCases();
std::vector<GraphKernelCase> LstmUnitGraphCases();
std::vector<GraphKernelCase> CtcGraphCases();

// The tables above concatenated, in that order.
std::vector<GraphKernelCase> Concatenated(const std::vector<std::vector<GraphKernelCase>>& tables);

// The dtypes every case runs in, and the tolerance of each: worst |cuda - reference| /
// (atol + rtol |reference|) must be <= 1.
constexpr DataType kGraphDtypes[] = {DataType::kF32, DataType::kF16, DataType::kBF16};
struct GraphTolerance {
  double atol, rtol;
};
GraphTolerance GraphToleranceFor(DataType t);

// How input 0 (the data) is laid out in a variant; parameters stay f32 row-major and other data
// inputs follow the dtype (dense).
enum class Variant { kNchw, kNhwc, kSubRegion };
const char* VariantName(Variant v);
bool IsSpatial(const CaseInput& in);
TensorType InputType(const CaseInput& in, int index, DataType dtype, Variant v);

// A one-node graph over Parameter inputs of `types`; `node` is the op's node. Null (with
// `error`) when the op refuses them.
std::unique_ptr<Graph> OneNodeGraph(const GraphKernelCase& c, const std::vector<TensorType>& types,
                                    const Node** node, std::string* error);

// True when the default registry has a CUDA kernel for `op`.
bool HasCudaKernel(const std::string& op);

// Runs every variant of `c`, returns how many ran; failures are reported through gtest
// (EXPECT_*), naming the case, dtype and layout.
int RunGraphKernelCase(const GraphKernelCase& c, uint32_t seed);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_
