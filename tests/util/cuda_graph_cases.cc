#include "tests/util/cuda_graph_cases.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {

namespace {

HostTensor MakeInput(const CaseInput& in, DataType dtype, bool nhwc, uint32_t seed) {
  if (in.kind == CaseInput::kLabels) {
    HostTensor t(*TensorType::Create(DataType::kF32, in.dims));
    std::mt19937 rng(seed);
    if (!in.values.empty()) {
      for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, in.values.at(i));
      return t;
    }
    std::uniform_int_distribution<int64_t> pick(0, in.label_classes - 1);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) {
      const bool ignore = in.ignored_label >= 0 && i % 5 == 2;
      t.SetFloat(i, static_cast<float>(ignore ? in.ignored_label : pick(rng)));
    }
    return t;
  }
  if (in.kind == CaseInput::kParameter) {
    return RandomTensor(*TensorType::Create(DataType::kF32, in.dims), seed, in.lo, in.hi);
  }
  const bool spatial = in.dims.size() == 4 || in.dims.size() == 5;
  const TensorType type = nhwc && spatial
                              ? *TensorType::CreateWithLayout(dtype, in.dims, Layout::kChannelsLast)
                              : *TensorType::Create(dtype, in.dims);
  return RandomTensor(type, seed, in.lo, in.hi);
}

// A strided view of the first corner of a buffer one larger in every dim: channels-last for 4-d
// and 5-d data, row-major otherwise.
TensorType SubRegionType(DataType dtype, const std::vector<int64_t>& dims) {
  std::vector<int64_t> outer = dims;
  for (int64_t& d : outer) ++d;
  const Layout layout =
      dims.size() == 4 || dims.size() == 5 ? Layout::kChannelsLast : Layout::kRowMajor;
  const TensorType container = *TensorType::CreateWithLayout(dtype, outer, layout);
  return *TensorType::CreateStrided(dtype, dims, container.strides());
}

}  // namespace

// f32 kernels accumulate in f32 (the reference in double); 16-bit outputs are rounded once by
// both sides from slightly different f32 values, so one unit in the last place can separate them.
GraphTolerance GraphToleranceFor(DataType t) {
  switch (t) {
    case DataType::kF16:
      return {4e-3, 4e-3};
    case DataType::kBF16:
      return {3e-2, 3e-2};
    default:
      return {1e-4, 1e-4};
  }
}

std::vector<GraphKernelCase> Concatenated(const std::vector<std::vector<GraphKernelCase>>& tables) {
  std::vector<GraphKernelCase> all;
  for (const auto& t : tables) all.insert(all.end(), t.begin(), t.end());
  return all;
}

const char* VariantName(Variant v) {
  return v == Variant::kNchw ? "nchw" : v == Variant::kNhwc ? "nhwc" : "sub-region";
}

bool IsSpatial(const CaseInput& in) { return in.dims.size() == 4 || in.dims.size() == 5; }

TensorType InputType(const CaseInput& in, int index, DataType dtype, Variant v) {
  if (in.kind != CaseInput::kData) return *TensorType::Create(DataType::kF32, in.dims);
  if (index == 0 && v == Variant::kSubRegion) return SubRegionType(dtype, in.dims);
  if (v == Variant::kNhwc && IsSpatial(in)) {
    return *TensorType::CreateWithLayout(dtype, in.dims, Layout::kChannelsLast);
  }
  return *TensorType::Create(dtype, in.dims);
}

std::unique_ptr<Graph> OneNodeGraph(const GraphKernelCase& c, const std::vector<TensorType>& types,
                                    const Node** node, std::string* error) {
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < types.size(); ++i) {
    auto v = b.Input(absl::StrCat("in", i), types[i]);
    if (!v.ok()) {
      *error = std::string(v.status().message());
      return nullptr;
    }
    values.push_back(*v);
  }
  auto outs = b.Op(c.op, values, c.attrs, "op");
  if (!outs.ok()) {
    *error = std::string(outs.status().message());
    return nullptr;
  }
  *node = (*outs)[0].node;
  return b.Finish();
}

CaseInput Data(std::vector<int64_t> dims, float lo, float hi) {
  CaseInput in;
  in.dims = std::move(dims);
  in.lo = lo;
  in.hi = hi;
  return in;
}

CaseInput Param(std::vector<int64_t> dims, float lo, float hi) {
  CaseInput in = Data(std::move(dims), lo, hi);
  in.kind = CaseInput::kParameter;
  return in;
}

AttrValue Str(const char* s) { return AttrValue(std::string(s)); }

CaseInput Labels(std::vector<int64_t> dims, int64_t classes, int64_t ignored) {
  CaseInput in;
  in.dims = std::move(dims);
  in.kind = CaseInput::kLabels;
  in.label_classes = classes;
  in.ignored_label = ignored;
  return in;
}

CaseInput Fixed(std::vector<int64_t> dims, std::vector<float> values) {
  CaseInput in;
  in.dims = std::move(dims);
  in.kind = CaseInput::kLabels;
  in.values = std::move(values);
  return in;
}

bool HasCudaKernel(const std::string& op) {
  for (const KernelFactory* f : DefaultKernelRegistry().ForOp(op)) {
    if (f->key.backend == Backend::kCuda) return true;
  }
  return false;
}

int RunGraphKernelCase(const GraphKernelCase& c, uint32_t seed) {
  int ran = 0;
  bool has_spatial = false;
  for (const CaseInput& in : c.inputs) {
    has_spatial = has_spatial ||
                  (in.kind == CaseInput::kData && (in.dims.size() == 4 || in.dims.size() == 5));
  }
  for (DataType dtype : {DataType::kF32, DataType::kF16, DataType::kBF16}) {
    for (bool nhwc : {false, true}) {
      if (nhwc && (!c.nhwc || !has_spatial)) continue;
      const std::string where =
          absl::StrCat(c.label, " ", DataTypeName(dtype), nhwc ? " nhwc" : " nchw");
      std::vector<HostTensor> inputs;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        inputs.push_back(MakeInput(c.inputs[i], dtype, nhwc, seed + 31 * static_cast<uint32_t>(i)));
      }
      const GraphTolerance tol = GraphToleranceFor(dtype);
      std::string kernel;
      auto ratio = CompareOutputsWithReference(c.op, inputs, c.attrs, BackendChoice::kCuda,
                                               tol.atol * c.tolerance_scale,
                                               tol.rtol * c.tolerance_scale, &kernel);
      ++ran;
      if (!ratio.ok()) {
        ADD_FAILURE() << where << ": " << ratio.status();
        continue;
      }
      EXPECT_EQ(kernel.rfind("cuda.", 0), 0u) << where << " ran on " << kernel;
      EXPECT_GE(*ratio, 0) << where << ": the output types differ from the reference's";
      EXPECT_LE(*ratio, 1.0) << where << ": worst error / tolerance (kernel " << kernel << ")";
    }
  }
  return ran;
}

}  // namespace testing
}  // namespace kiln
