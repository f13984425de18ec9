#include "dnn/cuda/primitive_call.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/dnn_reduce_rows.h"

namespace kiln {
namespace dnn {
namespace internal {

namespace {

constexpr size_t kAlign = 256;

size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

cuda::Storage StorageOf(DataType dtype) {
  switch (dtype) {
    case DataType::kF16:
      return cuda::Storage::kF16;
    case DataType::kBF16:
      return cuda::Storage::kBF16;
    default:
      return cuda::Storage::kF32;
  }
}

cuda::Operand OperandOf(const TensorDescriptor& d, const void* data) {
  cuda::Operand o;
  o.data = data;
  o.type = StorageOf(d.dtype);
  for (int i = 0; i < d.rank(); ++i) o.strides[i] = d.strides[i];
  return o;
}

cuda::Operand BroadcastOperandOf(const TensorDescriptor& d, const void* data,
                                 const TensorDescriptor& full) {
  cuda::Operand o = OperandOf(d, data);
  for (int i = 0; i < d.rank(); ++i) {
    if (d.dims[i] == 1 && full.dims[i] != 1) o.strides[i] = 0;
  }
  return o;
}

void Strides5(const TensorDescriptor& d, int64_t* out) {
  const int off = 5 - d.rank();
  out[0] = d.strides[0];
  out[1] = d.strides[1];
  for (int i = 2; i < 5; ++i) out[i] = 0;
  for (int i = 2; i < d.rank(); ++i) out[i + off] = d.strides[i];
}

std::vector<bool> KeptDims(const TensorDescriptor& reduced, const TensorDescriptor& full) {
  std::vector<bool> kept(full.rank());
  for (int i = 0; i < full.rank(); ++i) kept[i] = reduced.dims[i] == full.dims[i];
  return kept;
}

ActivationParams<float> ActivationParamsOf(const ActivationDescriptor& act) {
  ActivationParams<float> p;
  p.kind = static_cast<int>(act.mode);
  p.coef = static_cast<float>(act.coef);
  p.power = static_cast<float>(act.power);
  p.scale = static_cast<float>(act.scale);
  p.shift = static_cast<float>(act.shift);
  return p;
}

cuda::ElementwiseCall ElementwiseOver(cuda::ElementwiseOp op, const TensorDescriptor& out,
                                      void* out_data, float alpha, float beta) {
  cuda::ElementwiseCall c;
  c.op = op;
  c.rank = out.rank();
  for (int i = 0; i < out.rank(); ++i) c.dims[i] = out.dims[i];
  c.out = OperandOf(out, out_data);
  c.alpha = alpha;
  c.beta = beta;
  return c;
}

void AddInput(cuda::ElementwiseCall& call, cuda::Operand operand) {
  call.in[call.num_inputs++] = operand;
}

cuda::ReduceCall ReduceOver(cuda::ReduceOp op, const TensorDescriptor& a, const void* a_data,
                            const TensorDescriptor* b, const void* b_data,
                            const std::vector<bool>& is_feature, const TensorDescriptor& param,
                            const TensorDescriptor* mask, const void* mask_data) {
  cuda::ReduceCall c;
  c.op = op;
  c.a = OperandOf(a, a_data);
  if (b) c.b = OperandOf(*b, b_data);
  if (mask) c.mask = OperandOf(*mask, mask_data);
  int64_t smallest_stride = INT64_MAX;
  bool smallest_is_feature = false;
  bool previous_was_feature = true;  // no reduction dim to merge with yet
  for (int d = 0; d < a.rank(); ++d) {
    if (a.dims[d] == 1) continue;
    const bool was_feature = previous_was_feature;
    previous_was_feature = is_feature[d];
    const int64_t bs = b ? b->strides[d] : 0;
    const int64_t ms = mask ? mask->strides[d] : 0;
    if (a.strides[d] < smallest_stride) {
      smallest_stride = a.strides[d];
      smallest_is_feature = is_feature[d];
    }
    if (is_feature[d]) {
      const int k = c.feature_rank++;
      c.feature_dims[k] = a.dims[d];
      c.a_feature_strides[k] = a.strides[d];
      c.b_feature_strides[k] = bs;
      c.mask_feature_strides[k] = ms;
      c.param_strides[k] = param.strides[d];
      c.features *= a.dims[d];
      continue;
    }
    // Merge with the previous reduction dim when both operands allow it.
    const int k = c.reduce_rank;
    if (k > 0 && c.a_reduce_strides[k - 1] == a.strides[d] * a.dims[d] &&
        c.b_reduce_strides[k - 1] == bs * a.dims[d] &&
        c.mask_reduce_strides[k - 1] == ms * a.dims[d] && !was_feature) {
      c.reduce_dims[k - 1] *= a.dims[d];
      c.a_reduce_strides[k - 1] = a.strides[d];
      c.b_reduce_strides[k - 1] = bs;
      c.mask_reduce_strides[k - 1] = ms;
    } else {
      c.reduce_dims[k] = a.dims[d];
      c.a_reduce_strides[k] = a.strides[d];
      c.b_reduce_strides[k] = bs;
      c.mask_reduce_strides[k] = ms;
      ++c.reduce_rank;
    }
    c.reduce_count *= a.dims[d];
  }
  c.feature_major = smallest_is_feature;
  c.splits = cuda::ReduceSplits(c.features, c.reduce_count, c.feature_major);
  // Channels-last tensors take the rows kernel, which splits the rows its own way.
  cuda::RowsView rows;
  if (c.feature_major && cuda::RowsViewOf(c, &rows)) {
    c.splits = cuda::RowsSplits(c.features, rows.rows);
  }
  return c;
}

// Layout: partial sums, then the 4 kAffine vectors back to back (dense[k F + f]), then the
// dense mean and inverse std (vectors 4 and 5).
size_t ReduceWorkspaceBytes(const cuda::ReduceCall& call) {
  const size_t f = static_cast<size_t>(call.features) * sizeof(float);
  return AlignUp(static_cast<size_t>(call.splits) * call.features * 2 * sizeof(double)) +
         AlignUp(4 * f) + 2 * AlignUp(f);
}

size_t ReduceWorkspaceBytesForAnyOperands(const cuda::ReduceCall& call) {
  cuda::ReduceCall widest = call;
  widest.splits = std::max(
      call.splits, cuda::ReduceSplits(call.features, call.reduce_count, call.feature_major));
  return ReduceWorkspaceBytes(widest);
}

absl::Status BindReduceWorkspace(cuda::ReduceCall& call, void* workspace, size_t bytes,
                                 const char* where) {
  const size_t need = ReduceWorkspaceBytes(call);
  if (bytes < need || (need > 0 && workspace == nullptr)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": the workspace has ", bytes, " bytes but the call needs ", need));
  }
  call.partials = static_cast<double*>(workspace);
  call.dense = DenseVector(call, 0);
  return absl::OkStatus();
}

float* DenseVector(const cuda::ReduceCall& call, int k) {
  const size_t f = static_cast<size_t>(call.features) * sizeof(float);
  char* base = reinterpret_cast<char*>(call.partials) +
               AlignUp(static_cast<size_t>(call.splits) * call.features * 2 * sizeof(double));
  if (k < 4) return reinterpret_cast<float*>(base) + k * call.features;
  return reinterpret_cast<float*>(base + AlignUp(4 * f) + (k - 4) * AlignUp(f));
}

absl::Status LaunchStatus(int error, const char* where) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      where, ": kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(error))));
}

}  // namespace internal
}  // namespace dnn
}  // namespace kiln
