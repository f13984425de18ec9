// The CUDA backend's gradients against the reference backend's: every case of
// tests/util/gradient_cases.h (one forward op, its gradient graph built by the op's own gradient
// builder) compiled for both backends, run with poisoned buffers, every "y<j>" (forward) and
// "grad<i>" (input gradient) output compared. The reference itself is checked against finite
// differences in tests/training/gradient_check_test.cc, so together they check the CUDA
// gradient kernels (kernels/cuda/graph/) end to end.
//
// Variants: f32, f16 and bf16, each NCHW and (for a case with 4-d/5-d data) NHWC. The case's
// f32 inputs and output gradients are converted to the variant's dtype and order before the
// graph is built, so both backends read the same rounded values. As the compiler's precision
// pass does for a real plan, label ports (SoftmaxWithLoss labels, ContrastiveLoss similarity)
// stay f32 row-major, and so do the parameters the primitives keep in f32 (BatchNorm statistics,
// Scale/Bias/PReLU parameters); one more variant per 16-bit dtype gives those parameters the
// data's dtype (NCHW), as a graph whose trainable parameters are inputs would have them.
//
// Tolerances (worst |cuda - reference| / (atol + rtol |reference|) must be <= 1), as in
// cuda_graph_nn_test.cc: f32 1e-4 + 1e-4 relative; f16 4e-3 + 4e-3; bf16 3e-2 + 3e-2. In 16 bits
// the outputs that are sums over many elements (BiasGradient, ScaleParamGradient,
// ConvolutionBackwardFilter, InnerProductBackwardFilter, and a loss op's scalar loss) accumulate
// more rounding (its error grows like sqrt(terms) units): their atol is multiplied by
// sqrt(reduction length), the largest such reduction the output depends on. f32 is not scaled.
//
// A variant the CUDA kernels refuse (an Unimplemented status from compile) is listed as skipped
// with the message, printed at the end; only f32 NCHW must always compile. The GPU test skips
// without a device. The CPU test runs everywhere (CI too): every node of every gradient graph
// is accepted by a CUDA kernel and prepared (kernel selection and plan-time preparation need no
// device, with the one exception that test names) in f32 NCHW and f16 NHWC; the refusals of the
// other variants are printed.
#include <algorithm>
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
#include "tests/util/all_gradient_cases.h"
#include "tests/util/gradient_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {
namespace {

// How a variant lays out a case's inputs.
struct Variant {
  DataType dtype = DataType::kF32;
  bool nhwc = false;
  // 16-bit only: the f32-parameter ports take the data's dtype too.
  bool params_in_dtype = false;

  bool IsF32Nchw() const { return dtype == DataType::kF32 && !nhwc && !params_in_dtype; }
  std::string Name() const {
    return absl::StrCat(DataTypeName(dtype), nhwc ? " nhwc" : " nchw",
                        params_in_dtype ? " params-in-dtype" : "");
  }
};

// Ports that read class labels or similarity flags: left alone, as the precision pass does.
bool IsLabelPort(const std::string& op, int port) {
  return (port == 1 && op == "SoftmaxWithLoss") || (port == 2 && op == "ContrastiveLoss") ||
         (port == 0 && op == "Embed") ||  // table indices
         (port >= 1 && op == "CTCLoss");  // labels and lengths
}

// Ports whose parameters the primitives read as f32 whatever the data's dtype
// (passes/precision_layout.cc keeps them f32 in 16-bit plans).
bool IsF32ParameterPort(const std::string& op, int port) {
  if (op == "BatchNorm" || op == "Scale" || op == "AffineBatchNorm") return port >= 1;
  if (op == "PReLU" || op == "Bias") return port == 1;
  return false;
}

bool IsSpatial(const std::vector<int64_t>& dims) { return dims.size() == 4 || dims.size() == 5; }

std::vector<Variant> VariantsOf(const GradientCase& c) {
  bool spatial = false, parameters = false;
  for (size_t i = 0; i < c.input_dims.size(); ++i) {
    spatial = spatial || IsSpatial(c.input_dims[i]);
    parameters = parameters || IsF32ParameterPort(c.op, static_cast<int>(i));
  }
  std::vector<Variant> out;
  for (DataType dtype : {DataType::kF32, DataType::kF16, DataType::kBF16}) {
    out.push_back({dtype, false, false});
    if (spatial) out.push_back({dtype, true, false});
  }
  if (parameters) {
    for (DataType dtype : {DataType::kF16, DataType::kBF16}) out.push_back({dtype, false, true});
  }
  return out;
}

// The variant the CPU test requires for 16 bits: f16, channels-last where the case has 4-d data.
bool IsF16Nhwc(const GradientCase& c, const Variant& v) {
  bool spatial = false;
  for (const auto& dims : c.input_dims) spatial = spatial || IsSpatial(dims);
  return v.dtype == DataType::kF16 && v.nhwc == spatial && !v.params_in_dtype;
}

TensorType TypeFor(const std::vector<int64_t>& dims, DataType dtype, bool channels_last) {
  return channels_last && IsSpatial(dims)
             ? *TensorType::CreateWithLayout(dtype, dims, Layout::kChannelsLast)
             : *TensorType::Create(dtype, dims);
}

HostTensor ConvertTo(const HostTensor& from, const TensorType& type) {
  HostTensor out(type);
  for (int64_t i = 0; i < type.num_elements(); ++i) out.SetFloat(i, from.GetFloat(i));
  return out;
}

// The case's f32 inputs and output gradients in the variant's types. Output gradients take the
// dtype and order of the forward outputs they stand for (learnt by building the forward node).
absl::StatusOr<GradientInputs> InputsFor(const GradientCase& c, const GradientInputs& f32,
                                         const Variant& v) {
  GradientInputs out;
  for (size_t i = 0; i < f32.inputs.size(); ++i) {
    const HostTensor& x = f32.inputs[i];
    const int port = static_cast<int>(i);
    if (IsLabelPort(c.op, port) || (IsF32ParameterPort(c.op, port) && !v.params_in_dtype)) {
      out.inputs.push_back(x);
    } else {
      out.inputs.push_back(ConvertTo(x, TypeFor(x.type().dims(), v.dtype, v.nhwc)));
    }
  }
  if (f32.output_grads.empty()) return out;
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < out.inputs.size(); ++i) {
    auto value = b.Input(absl::StrCat("x", i), out.inputs[i].type());
    if (!value.ok()) return value.status();
    values.push_back(*value);
  }
  auto ys = b.Op(c.op, values, c.attrs, "op");
  if (!ys.ok()) return ys.status();
  for (size_t j = 0; j < f32.output_grads.size(); ++j) {
    const TensorType& y = (*ys)[j].type();
    const bool channels_last = y.IsChannelsLast() && !y.IsContiguous();
    out.output_grads.push_back(
        ConvertTo(f32.output_grads[j], TypeFor(y.dims(), y.dtype(), channels_last)));
  }
  return out;
}

// The number of terms of the largest reduction `value` depends on within its graph (1 if none).
int64_t ReductionLength(const Value& value, const GradientCase& c) {
  int64_t longest = 1;
  std::set<const Node*> seen;
  std::vector<const Node*> stack = {value.node};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    const std::string& op = n->op();
    const int64_t out = std::max<int64_t>(1, n->output_types()[0].num_elements());
    int64_t terms = 1;
    if (op == "BiasGradient") {
      terms = n->input(0).type().num_elements() / out;
    } else if (op == "ScaleParamGradient") {
      terms = n->input(1).type().num_elements() / out;
    } else if (op == "ConvolutionBackwardFilter") {
      const TensorType& dy = n->input(1).type();  // N K spatial...: N * spatial terms per filter
      terms = dy.num_elements() / std::max<int64_t>(1, dy.dims()[1]);
    } else if (op == "InnerProductBackwardFilter") {
      const TensorType& dy = n->input(1).type();  // M x N_out: M terms per weight
      terms = dy.num_elements() / std::max<int64_t>(1, dy.dims().back());
    } else if (n == value.node && op == c.op && c.loss_weight != 0) {
      terms = n->input(0).type().num_elements();  // the scalar loss itself
    }
    longest = std::max(longest, terms);
    for (const Value& in : n->inputs()) stack.push_back(in.node);
  }
  return longest;
}

struct Tolerance {
  double atol, rtol;
};

Tolerance ToleranceFor(DataType t) {
  switch (t) {
    case DataType::kF16:
      return {4e-3, 4e-3};
    case DataType::kBF16:
      return {3e-2, 3e-2};
    default:
      return {1e-4, 1e-4};
  }
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> CompileFor(const Graph& graph,
                                                          BackendChoice backend) {
  CompileOptions options;
  options.backend = backend;
  return Compile(graph, DefaultKernelRegistry(), options);
}

absl::StatusOr<std::map<std::string, HostTensor>> RunPlan(
    const ExecutionPlan& plan, const std::map<std::string, HostTensor>& bindings) {
  ContextOptions options;
  options.poison_buffers = true;
  auto ctx = ExecutionContext::Create(plan, options);
  if (!ctx.ok()) return ctx.status();
  return (*ctx)->Run(bindings);
}

// What the GPU test counts and lists.
struct Tally {
  int checked = 0;
  std::vector<std::string> skipped;
};

// A variant that could not be built or compiled: skipped when it is not f32 NCHW and the status
// is Unimplemented (a kernel refusing a dtype or layout), a failure otherwise.
void NotRun(const Variant& v, const std::string& where, const absl::Status& status, Tally& t) {
  if (!v.IsF32Nchw() && absl::IsUnimplemented(status)) {
    t.skipped.push_back(absl::StrCat(where, ": ", status.message()));
  } else {
    ADD_FAILURE() << where << ": " << status;
  }
}

void CheckVariant(const GradientCase& c, const GradientInputs& f32, const Variant& v, Tally& t) {
  const std::string where = absl::StrCat(c.name, " ", v.Name());
  auto in = InputsFor(c, f32, v);
  if (!in.ok()) return NotRun(v, absl::StrCat(where, " (forward types)"), in.status(), t);
  std::vector<int> grads;
  auto graph = BuildGradientGraph(c, *in, &grads);
  if (!graph.ok()) return NotRun(v, absl::StrCat(where, " (gradient graph)"), graph.status(), t);
  auto cuda_plan = CompileFor(**graph, BackendChoice::kCuda);
  if (!cuda_plan.ok()) return NotRun(v, absl::StrCat(where, " (cuda)"), cuda_plan.status(), t);
  auto reference_plan = CompileFor(**graph, BackendChoice::kReference);
  if (!reference_plan.ok()) {
    return NotRun(v, absl::StrCat(where, " (reference)"), reference_plan.status(), t);
  }
  ++t.checked;
  for (const PlanStep& step : (*cuda_plan)->steps()) {
    EXPECT_TRUE(absl::StartsWith(step.kernel_name, "cuda."))
        << where << ": node '" << step.node->name() << "' ran on " << step.kernel_name;
  }
  const auto bindings = GradientBindings(*in);
  auto actual = RunPlan(**cuda_plan, bindings);
  ASSERT_TRUE(actual.ok()) << where << " (cuda run): " << actual.status();
  auto expected = RunPlan(**reference_plan, bindings);
  ASSERT_TRUE(expected.ok()) << where << " (reference run): " << expected.status();
  EXPECT_FALSE(grads.empty()) << where;
  const bool sixteen_bit = v.dtype != DataType::kF32;
  for (const GraphOutput& o : (*graph)->outputs()) {
    const HostTensor& a = actual->at(o.name);
    const HostTensor& e = expected->at(o.name);
    ASSERT_EQ(a.type().dims(), e.type().dims()) << where << " " << o.name;
    ASSERT_EQ(a.type().dtype(), e.type().dtype()) << where << " " << o.name;
    Tolerance tol = ToleranceFor(o.value.type().dtype());
    const int64_t terms = sixteen_bit ? ReductionLength(o.value, c) : 1;
    tol.atol *= std::sqrt(static_cast<double>(terms));
    std::vector<double> reference;
    for (float x : e.ToF32Vector()) reference.push_back(x);
    const double ratio = ToleranceRatio(a, reference, tol.atol, tol.rtol);
    EXPECT_GE(ratio, 0) << where << " " << o.name << ": element counts differ";
    EXPECT_LE(ratio, 1.0) << where << " " << o.name << " (" << o.value.node->op() << ", atol "
                          << tol.atol << "): worst error / tolerance";
  }
}

TEST(CudaGradientTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  Tally tally;
  const std::vector<GradientCase> cases = AllGradientCases();
  uint32_t seed = 2024;
  // KILN_GRADIENT_CASES=a,b checks only the cases whose name starts with a or b (one family on a
  // GPU budget); every case keeps the seed it has in the whole run.
  const char* only = std::getenv("KILN_GRADIENT_CASES");
  std::vector<std::string> wanted;
  if (only != nullptr) wanted = absl::StrSplit(only, ',', absl::SkipEmpty());
  for (const GradientCase& c : cases) {
    auto f32 = MakeGradientInputs(c, seed += 13);
    ASSERT_TRUE(f32.ok()) << c.name << ": " << f32.status();
    bool skip = only != nullptr;
    for (const std::string& w : wanted) skip = skip && !absl::StartsWith(c.name, w);
    if (skip) continue;
    for (const Variant& v : VariantsOf(c)) CheckVariant(c, *f32, v, tally);
  }
  std::printf("cuda gradients: %d cases x variants checked, %zu skipped\n", tally.checked,
              tally.skipped.size());
  for (const std::string& s : tally.skipped) std::printf("  skipped variant: %s\n", s.c_str());
  EXPECT_GE(cases.size(), 40u);
}

// Kernel selection and plan-time preparation need no device: every node of every gradient
// graph (forward and backward) is accepted by a CUDA kernel and prepared here, in f32 NCHW and
// f16 NHWC, so a refusal or a plan-time error shows in CI. The other variants' refusals are the
// ones the GPU test will list as skipped: printed, not failed. One preparation needs a device
// even at plan time: the convolution heuristic sizes the FFT algorithm's workspace from a cuFFT
// plan (f32 convolutions it applies to); without a device such a node must still be selected,
// and its cuFFT error is listed instead of failing.
TEST(CudaGradientTest, EveryGradientNodeIsSelectedAndPreparedWithoutADevice) {
  const bool device = ProbeCuda().usable;
  int planned = 0;
  std::vector<std::string> refused, needs_device;
  for (const GradientCase& c : AllGradientCases()) {
    auto f32 = MakeGradientInputs(c, 7);
    ASSERT_TRUE(f32.ok()) << c.name << ": " << f32.status();
    for (const Variant& v : VariantsOf(c)) {
      const bool required = v.IsF32Nchw() || IsF16Nhwc(c, v);
      const std::string where = absl::StrCat(c.name, " ", v.Name());
      auto in = InputsFor(c, *f32, v);
      ASSERT_TRUE(in.ok()) << where << ": " << in.status();
      std::vector<int> grads;
      auto graph = BuildGradientGraph(c, *in, &grads);
      ASSERT_TRUE(graph.ok()) << where << ": " << graph.status();
      auto order = (*graph)->TopologicalOrder();
      ASSERT_TRUE(order.ok()) << where << ": " << order.status();
      for (const Node* node : *order) {
        if (node->kind() == OpKind::kParameter || node->kind() == OpKind::kConstant) continue;
        const std::string at =
            absl::StrCat(where, ": node '", node->name(), "' (", node->op(), ")");
        absl::Status status;
        auto factory = DefaultKernelRegistry().Select(*node, Backend::kCuda);
        if (!factory.ok()) {
          status = factory.status();
        } else {
          EXPECT_TRUE(absl::StartsWith((*factory)->key.Name(), "cuda.")) << at;
          status = CreateKernel(**factory, *node, KernelOptions()).status();
        }
        if (status.ok()) {
          ++planned;
        } else if (!device && absl::IsInternal(status) &&
                   absl::StrContains(status.message(), "cufft")) {
          // The heuristic sizes the FFT algorithm's workspace from a cuFFT plan, which needs a
          // device: the node was selected, its preparation is left to the GPU test.
          needs_device.push_back(absl::StrCat(at, ": ", status.message()));
        } else if (required) {
          ADD_FAILURE() << at << ": " << status;
        } else {
          refused.push_back(absl::StrCat(at, ": ", status.message()));
        }
      }
    }
  }
  std::printf("cuda gradients: %d nodes planned without a device, %zu refused\n", planned,
              refused.size());
  for (const std::string& r : refused) std::printf("  refused (optional variant): %s\n", r.c_str());
  std::printf("cuda gradients: %zu nodes selected, their preparation needs a device\n",
              needs_device.size());
  for (const std::string& n : needs_device) std::printf("  needs a device: %s\n", n.c_str());
  EXPECT_GT(planned, 0);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
