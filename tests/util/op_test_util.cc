#include "tests/util/op_test_util.h"

#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/executor.h"

namespace kiln {
namespace testing {

HostTensor RandomTensor(const TensorType& type, uint32_t seed, float lo, float hi) {
  HostTensor t(type);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < type.num_elements(); ++i) t.SetFloat(i, dist(rng));
  return t;
}

TensorType F32(const std::vector<int64_t>& dims) {
  return *TensorType::Create(DataType::kF32, dims);
}

TensorType Nhwc(const std::vector<int64_t>& dims, DataType dtype) {
  return *TensorType::CreateWithLayout(dtype, dims, Layout::kChannelsLast);
}

absl::StatusOr<std::vector<HostTensor>> RunOp(const std::string& op,
                                              const std::vector<HostTensor>& inputs,
                                              const AttrMap& attrs, BackendChoice backend,
                                              std::string* kernel_name) {
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  std::map<std::string, HostTensor> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = absl::StrCat("in", i);
    KILN_ASSIGN_OR_RETURN(Value v, b.Input(name, inputs[i].type()));
    values.push_back(v);
    bindings[name] = inputs[i];
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, b.Op(op, values, attrs, "op"));
  for (size_t i = 0; i < outs.size(); ++i) {
    KILN_RETURN_IF_ERROR(b.Output(absl::StrCat("out", i), outs[i]));
  }
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = backend;
  KILN_ASSIGN_OR_RETURN(auto plan, Compile(*graph, DefaultKernelRegistry(), options));
  if (kernel_name != nullptr) *kernel_name = plan->steps()[0].kernel_name;
  ContextOptions context_options;
  context_options.poison_buffers = true;
  KILN_ASSIGN_OR_RETURN(auto ctx, ExecutionContext::Create(*plan, context_options));
  KILN_ASSIGN_OR_RETURN(auto results, ctx->Run(bindings));
  std::vector<HostTensor> out;
  for (size_t i = 0; i < outs.size(); ++i) out.push_back(results.at(absl::StrCat("out", i)));
  return out;
}

absl::StatusOr<double> CompareWithReference(const std::string& op,
                                            const std::vector<std::vector<int64_t>>& input_dims,
                                            const AttrMap& attrs, BackendChoice backend,
                                            uint32_t seed, double atol, double rtol,
                                            std::string* kernel_name) {
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < input_dims.size(); ++i) {
    inputs.push_back(RandomTensor(F32(input_dims[i]), seed + static_cast<uint32_t>(i)));
  }
  KILN_ASSIGN_OR_RETURN(auto actual, RunOp(op, inputs, attrs, backend, kernel_name));
  KILN_ASSIGN_OR_RETURN(auto reference, RunOp(op, inputs, attrs, BackendChoice::kReference));
  std::vector<double> expected;
  for (float v : reference[0].ToF32Vector()) expected.push_back(v);
  return ToleranceRatio(actual[0], expected, atol, rtol);
}

absl::StatusOr<double> CompareOutputsWithReference(const std::string& op,
                                                   const std::vector<HostTensor>& inputs,
                                                   const AttrMap& attrs, BackendChoice backend,
                                                   double atol, double rtol,
                                                   std::string* kernel_name) {
  KILN_ASSIGN_OR_RETURN(auto actual, RunOp(op, inputs, attrs, backend, kernel_name));
  KILN_ASSIGN_OR_RETURN(auto reference, RunOp(op, inputs, attrs, BackendChoice::kReference));
  if (actual.size() != reference.size()) return -1.0;
  double worst = 0;
  for (size_t k = 0; k < actual.size(); ++k) {
    if (actual[k].type() != reference[k].type()) return -1.0;  // the kernels disagree on types
    std::vector<double> expected;
    for (float v : reference[k].ToF32Vector()) expected.push_back(v);
    const double ratio = ToleranceRatio(actual[k], expected, atol, rtol);
    if (ratio < 0) return ratio;
    worst = std::max(worst, ratio);
  }
  return worst;
}

double ToleranceRatio(const HostTensor& actual, const std::vector<double>& expected, double atol,
                      double rtol) {
  if (actual.type().num_elements() != static_cast<int64_t>(expected.size())) return -1;
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual.GetFloat(static_cast<int64_t>(i));
    if (std::isnan(a) || std::isnan(expected[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(a - expected[i]) / (atol + rtol * std::fabs(expected[i])));
  }
  return worst;
}

std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
  return index;
}

int64_t Flatten(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + index[d];
  return flat;
}

double RelativeL2(const HostTensor& actual, const HostTensor& expected) {
  if (actual.type().dims() != expected.type().dims()) return INFINITY;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < expected.type().num_elements(); ++i) {
    const double a = actual.GetFloat(i), e = expected.GetFloat(i);
    if (!std::isfinite(a)) return INFINITY;
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace testing
}  // namespace kiln
