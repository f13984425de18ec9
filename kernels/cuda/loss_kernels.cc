// The losses (forward and backward) and Accuracy as graph kernels. SoftmaxWithLoss runs on the
// primitive (softmax and the normalized loss in f32); the others on the small deterministic
// reductions of loss_kernels.cu. Every input that is not packed row-major (an NHWC score map, say)
// is first transformed into a packed copy in the workspace, which is what the reductions index. A
// loss is one value of the scores' dtype; 16-bit plans get it rounded from the f32/double result.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/softmax.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/cuda/loss_launch.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

constexpr size_t kAlign = 256;
size_t AlignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

absl::StatusOr<cuda::LossStorage> StorageOf(DataType t) {
  switch (t) {
    case DataType::kF32:
      return cuda::LossStorage::kF32;
    case DataType::kF16:
      return cuda::LossStorage::kF16;
    case DataType::kBF16:
      return cuda::LossStorage::kBF16;
    case DataType::kI32:
      return cuda::LossStorage::kI32;
    default:
      return absl::UnimplementedError(absl::StrCat("loss operands of ", DataTypeName(t)));
  }
}

// Where each input is read from at run time: in place when packed, else a packed copy made in
// the workspace first.
struct PackedInputs {
  std::vector<dnn::TensorDescriptor> given, packed;
  std::vector<bool> repack;
  std::vector<size_t> offset;  // in the workspace, for repacked inputs
  std::vector<cuda::LossStorage> storage;
  size_t bytes = 0;

  static absl::StatusOr<PackedInputs> For(const Node& node) {
    PackedInputs p;
    for (const Value& v : node.inputs()) {
      const TensorType& t = v.type();
      KILN_ASSIGN_OR_RETURN(cuda::LossStorage s, StorageOf(t.dtype()));
      p.storage.push_back(s);
      const bool repack = !t.IsContiguous();
      if (repack && t.dtype() == DataType::kI32) {
        return absl::UnimplementedError("i32 labels must be packed row-major");
      }
      p.repack.push_back(repack);
      p.offset.push_back(p.bytes);
      if (repack) p.bytes += AlignUp(static_cast<size_t>(t.Contiguous().span_bytes()));
      KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor g, DescriptorOf(t));
      KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, DescriptorOf(t.Contiguous()));
      p.given.push_back(g);
      p.packed.push_back(d);
    }
    return p;
  }

  // The packed operands of this run, making the copies first.
  absl::StatusOr<std::vector<cuda::LossOperand>> Bind(dnn::Handle& handle,
                                                      const KernelArgs& a) const {
    std::vector<cuda::LossOperand> out;
    for (size_t i = 0; i < given.size(); ++i) {
      const void* data = a.inputs[i].data;
      if (repack[i]) {
        void* copy = static_cast<char*>(a.workspace) + offset[i];
        KILN_RETURN_IF_ERROR(
            dnn::TransformTensor(handle, 1.0f, given[i], data, 0.0f, packed[i], copy));
        data = copy;
      }
      out.push_back({data, storage[i]});
    }
    return out;
  }
};

absl::Status CheckLoss(const Node& node) {
  // Labels (input 1 of SoftmaxWithLoss/Accuracy) may be i32; everything else is float data.
  const bool labels = node.kind() == OpKind::kSoftmaxWithLoss || node.kind() == OpKind::kAccuracy ||
                      node.kind() == OpKind::kSoftmaxWithLossGradient;
  KILN_RETURN_IF_ERROR(cuda_graph::RequireFloatData(node, labels ? 1 : -1));
  return PackedInputs::For(node).status();
}

absl::Status Launched(int error, const char* what) {
  return dnn::internal::LaunchStatus(error, what);
}

// What SoftmaxWithLoss and its gradient share: the primitive's descriptor, the labels and
// probabilities as it reads them, and the workspace layout (repacked inputs, the probabilities,
// the f32 loss).
struct SoftmaxLossPlan {
  PackedInputs in;
  dnn::SoftmaxLossDescriptor loss;
  dnn::TensorDescriptor labeld, probd;
  size_t prob_at = 0, loss_at = 0, end = 0;
};

absl::StatusOr<SoftmaxLossPlan> PlanSoftmaxLoss(const Node& node) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  SoftmaxLossPlan p;
  KILN_ASSIGN_OR_RETURN(p.in, PackedInputs::For(node));
  if (node.input(1).type().dtype() == DataType::kI32) {
    return absl::UnimplementedError("SoftmaxWithLoss on CUDA takes labels stored as floats");
  }
  p.loss.axis = axis;
  const auto& ignore = node.GetInts("ignore_label");
  p.loss.has_ignore_label = !ignore.empty();
  p.loss.ignore_label = ignore.empty() ? -1 : ignore[0];
  const std::string& mode = node.GetString("normalization");
  p.loss.normalization = mode == "full"         ? dnn::LossNormalization::kFull
                         : mode == "valid"      ? dnn::LossNormalization::kValid
                         : mode == "batch_size" ? dnn::LossNormalization::kBatchSize
                                                : dnn::LossNormalization::kNone;
  if (node.def().FindAttr("loss_weight") != nullptr) {
    p.loss.loss_weight = node.GetFloat("loss_weight");
  }
  // The labels as the primitive reads them: x's dims with one class.
  std::vector<int64_t> label_dims = x.dims();
  label_dims[axis] = 1;
  KILN_ASSIGN_OR_RETURN(p.labeld,
                        dnn::TensorDescriptor::Create(node.input(1).type().dtype(), label_dims,
                                                      RowMajorStrides(label_dims)));
  // The probabilities (the forward only needs the loss, but the primitive writes them) in x's
  // dtype.
  KILN_ASSIGN_OR_RETURN(
      p.probd, dnn::TensorDescriptor::Create(x.dtype(), x.dims(), RowMajorStrides(x.dims())));
  p.prob_at = p.in.bytes;
  p.loss_at = p.prob_at + AlignUp(static_cast<size_t>(x.num_elements()) * DataTypeSize(x.dtype()));
  p.end = p.loss_at + kAlign;
  return p;
}

absl::StatusOr<PreparedKernel> PrepareSoftmaxWithLoss(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(SoftmaxLossPlan p, PlanSoftmaxLoss(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor f32_scalar,
                        dnn::TensorDescriptor::Create(DataType::kF32, {1}, {1}));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor out_d, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.workspace_bytes = p.end;
  k.run = [p, f32_scalar, out_d](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<cuda::LossOperand> ops, p.in.Bind(handle, a));
    char* ws = static_cast<char*>(a.workspace);
    KILN_RETURN_IF_ERROR(dnn::SoftmaxLossForward(handle, p.loss, p.in.packed[0], ops[0].data,
                                                 p.labeld, ops[1].data, p.probd, ws + p.prob_at,
                                                 ws + p.loss_at));
    return dnn::TransformTensor(handle, 1.0f, f32_scalar, ws + p.loss_at, 0.0f, out_d,
                                a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<PreparedKernel> PrepareReduction(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(PackedInputs in, PackedInputs::For(node));
  KILN_ASSIGN_OR_RETURN(cuda::LossStorage out_type, StorageOf(node.output_types()[0].dtype()));
  const TensorType& x = node.input(0).type();
  const std::string op = node.op();
  const int64_t count = x.num_elements();
  const int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  // Accuracy's view of the scores.
  int64_t outer = 1, classes = 1, inner = 1, top_k = 1;
  bool has_ignore = false;
  int64_t ignore = 0;
  if (node.def().FindAttr("ignore_label") != nullptr) {
    const auto& list = node.GetInts("ignore_label");
    has_ignore = !list.empty();
    ignore = has_ignore ? list[0] : 0;
  }
  if (op == "Accuracy") {
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
    outer = ProductOfDims(x.dims(), 0, axis);
    classes = x.dim(axis);
    inner = ProductOfDims(x.dims(), axis + 1, x.rank());
    top_k = node.GetInt("top_k");
  }
  cuda::LossNormalizer normalizer = cuda::LossNormalizer::kBatchSize;
  if (op == "SigmoidCrossEntropyLoss") {
    const std::string& mode = node.GetString("normalization");
    normalizer = mode == "full"         ? cuda::LossNormalizer::kFull
                 : mode == "valid"      ? cuda::LossNormalizer::kValid
                 : mode == "batch_size" ? cuda::LossNormalizer::kBatchSize
                                        : cuda::LossNormalizer::kNone;
  }
  const double margin = op == "ContrastiveLoss" ? node.GetFloat("margin") : 0.0;
  const bool legacy = op == "ContrastiveLoss" && node.GetBool("legacy_version");
  const int64_t width = rows > 0 ? count / rows : 0;
  PreparedKernel k;
  k.workspace_bytes = in.bytes;
  const std::string where = absl::StrCat("cuda ", op);
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    const char* what = where.c_str();
    KILN_ASSIGN_OR_RETURN(std::vector<cuda::LossOperand> ops, in.Bind(handle, a));
    const cuda::LossOperand out{a.outputs[0].data, out_type};
    void* s = a.stream;
    if (op == "Accuracy") {
      return Launched(cuda::LaunchAccuracy(ops[0], ops[1], outer, classes, inner, top_k, has_ignore,
                                           ignore, out, s),
                      what);
    }
    if (op == "EuclideanLoss") {
      return Launched(cuda::LaunchEuclideanLoss(ops[0], ops[1], count, rows, out, s), what);
    }
    if (op == "SigmoidCrossEntropyLoss") {
      return Launched(cuda::LaunchSigmoidCrossEntropyLoss(ops[0], ops[1], count, rows, has_ignore,
                                                          ignore, normalizer, out, s),
                      what);
    }
    return Launched(
        cuda::LaunchContrastiveLoss(ops[0], ops[1], ops[2], rows, width, margin, legacy, out, s),
        what);
  };
  return k;
}

// ---- The losses' gradients ----

// SoftmaxWithLossGradient(logits, labels) -> dlogits: the primitive's forward for the
// probabilities (into the workspace), then its backward with the loss weight.
absl::StatusOr<PreparedKernel> PrepareSoftmaxWithLossGradient(const Node& node,
                                                              const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(SoftmaxLossPlan p, PlanSoftmaxLoss(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.workspace_bytes = p.end + AlignUp(dnn::kSoftmaxLossWorkspaceBytes);
  k.description = absl::StrCat("loss_weight ", p.loss.loss_weight);
  k.run = [p, dxd](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<cuda::LossOperand> ops, p.in.Bind(handle, a));
    char* ws = static_cast<char*>(a.workspace);
    KILN_RETURN_IF_ERROR(dnn::SoftmaxLossForward(handle, p.loss, p.in.packed[0], ops[0].data,
                                                 p.labeld, ops[1].data, p.probd, ws + p.prob_at,
                                                 ws + p.loss_at));
    return dnn::SoftmaxLossBackward(handle, p.loss, p.probd, ws + p.prob_at, p.labeld, ops[1].data,
                                    1.0f, 0.0f, dxd, a.outputs[0].data, ws + p.end,
                                    dnn::kSoftmaxLossWorkspaceBytes);
  };
  return k;
}

// Euclidean, sigmoid cross-entropy and contrastive gradients on the one-block kernels of
// loss_kernels.cu, written packed (into the workspace first when an output is not packed).
absl::StatusOr<PreparedKernel> PrepareLossGradient(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(PackedInputs in, PackedInputs::For(node));
  const std::string op = node.op();
  const TensorType& x = node.input(0).type();
  const int64_t count = x.num_elements();
  const int64_t rows = x.rank() > 0 ? x.dim(0) : 1;
  const int64_t width = rows > 0 ? count / rows : 0;
  const double weight = node.GetFloat("loss_weight");
  bool has_ignore = false;
  int64_t ignore = 0;
  cuda::LossNormalizer normalizer = cuda::LossNormalizer::kBatchSize;
  if (op == "SigmoidCrossEntropyLossGradient") {
    const auto& list = node.GetInts("ignore_label");
    has_ignore = !list.empty();
    ignore = has_ignore ? list[0] : 0;
    const std::string& mode = node.GetString("normalization");
    normalizer = mode == "full"         ? cuda::LossNormalizer::kFull
                 : mode == "valid"      ? cuda::LossNormalizer::kValid
                 : mode == "batch_size" ? cuda::LossNormalizer::kBatchSize
                                        : cuda::LossNormalizer::kNone;
  }
  const bool contrastive = op == "ContrastiveLossGradient";
  const double margin = contrastive ? node.GetFloat("margin") : 0.0;
  const bool legacy = contrastive && node.GetBool("legacy_version");
  // Each output: written in place when packed, else staged packed and transformed.
  struct Out {
    bool staged = false;
    size_t at = 0;
    cuda::LossStorage storage;
    dnn::TensorDescriptor packed, given;
  };
  std::vector<Out> outs;
  size_t bytes = in.bytes;
  for (const TensorType& t : node.output_types()) {
    Out o;
    KILN_ASSIGN_OR_RETURN(o.storage, StorageOf(t.dtype()));
    KILN_ASSIGN_OR_RETURN(o.packed, DescriptorOf(t.Contiguous()));
    KILN_ASSIGN_OR_RETURN(o.given, DescriptorOf(t));
    o.staged = !t.IsContiguous();
    o.at = bytes;
    if (o.staged) bytes += AlignUp(static_cast<size_t>(t.Contiguous().span_bytes()));
    outs.push_back(o);
  }
  PreparedKernel k;
  k.workspace_bytes = bytes;
  k.description = absl::StrCat("loss_weight ", weight);
  const std::string where = absl::StrCat("cuda ", op);
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<cuda::LossOperand> ops, in.Bind(handle, a));
    std::vector<cuda::LossOperand> out;
    for (size_t i = 0; i < outs.size(); ++i) {
      void* p = outs[i].staged ? static_cast<char*>(a.workspace) + outs[i].at : a.outputs[i].data;
      out.push_back({p, outs[i].storage});
    }
    void* s = a.stream;
    int error = 0;
    if (op == "EuclideanLossGradient") {
      error = cuda::LaunchEuclideanLossGradient(ops[0], ops[1], count, rows, weight, out[0], s);
    } else if (op == "SigmoidCrossEntropyLossGradient") {
      error = cuda::LaunchSigmoidCrossEntropyLossGradient(ops[0], ops[1], count, rows, has_ignore,
                                                          ignore, normalizer, weight, out[0], s);
    } else {
      error = cuda::LaunchContrastiveLossGradient(ops[0], ops[1], ops[2], rows, width, margin,
                                                  legacy, weight, out[0], out[1], s);
    }
    KILN_RETURN_IF_ERROR(Launched(error, where.c_str()));
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].staged) continue;
      KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, outs[i].packed, out[i].data, 0.0f,
                                                outs[i].given, a.outputs[i].data));
    }
    return absl::OkStatus();
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaLossKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, "SoftmaxWithLossGradient", "any",
                                           "dnn_softmax_loss", CheckLoss,
                                           PrepareSoftmaxWithLossGradient, 0,
                                           /*check_dtypes=*/false));
  for (const char* op :
       {"EuclideanLossGradient", "SigmoidCrossEntropyLossGradient", "ContrastiveLossGradient"}) {
    KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, op, "any", "block_elementwise", CheckLoss,
                                             PrepareLossGradient, 0, /*check_dtypes=*/false));
  }
  using cuda_graph::RegisterGraphKernel;
  KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, "SoftmaxWithLoss", "any", "dnn_softmax_loss",
                                           CheckLoss, PrepareSoftmaxWithLoss, 0,
                                           /*check_dtypes=*/false));
  for (const char* op :
       {"Accuracy", "EuclideanLoss", "SigmoidCrossEntropyLoss", "ContrastiveLoss"}) {
    KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, op, "any", "block_reduction", CheckLoss,
                                             PrepareReduction, 0, /*check_dtypes=*/false));
  }
  return absl::OkStatus();
}

}  // namespace kiln
