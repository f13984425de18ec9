#include "dnn/cuda/tensor_ops.h"

#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

using cuda::ElementwiseOp;
using internal::AddInput;
using internal::ElementwiseOver;
using internal::LaunchStatus;
using internal::OperandOf;

namespace {

// A descriptor's element at `offset` elements from `base`.
const void* At(const void* base, DataType dtype, int64_t offset) {
  return static_cast<const char*>(base) + offset * static_cast<int64_t>(DataTypeSize(dtype));
}

}  // namespace

absl::Status TransformTensor(Handle& handle, float alpha, const TensorDescriptor& xd, const void* x,
                             float beta, const TensorDescriptor& yd, void* y) {
  if (xd.dims != yd.dims) {
    return absl::InvalidArgumentError(absl::StrCat("TransformTensor: x ", xd.ToString(), " and y ",
                                                   yd.ToString(), " differ in dims"));
  }
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kCopy, yd, y, alpha, beta);
  AddInput(c, OperandOf(xd, x));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "TransformTensor");
}

absl::Status AddTensor(Handle& handle, float alpha, const TensorDescriptor& bd, const void* b,
                       float beta, const TensorDescriptor& yd, void* y) {
  KILN_RETURN_IF_ERROR(CheckBroadcastable(bd, "b", yd, "y", "AddTensor"));
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kCopy, yd, y, alpha, beta);
  AddInput(c, internal::BroadcastOperandOf(bd, b, yd));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "AddTensor");
}

absl::Status ScaleTensor(Handle& handle, const TensorDescriptor& yd, void* y, float alpha) {
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kCopy, yd, y, alpha, 0);
  AddInput(c, OperandOf(yd, y));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "ScaleTensor");
}

size_t ReduceTensorSumWorkspaceSize(const TensorDescriptor& dyd, const TensorDescriptor& dbd) {
  if (dbd.rank() != dyd.rank()) return 0;
  return internal::ReduceWorkspaceBytes(internal::ReduceOver(
      cuda::ReduceOp::kSum, dyd, nullptr, nullptr, nullptr, internal::KeptDims(dbd, dyd), dbd));
}

absl::Status ReduceTensorSum(Handle& handle, float alpha, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dbd, void* db,
                             void* workspace, size_t workspace_bytes) {
  const char* where = "ReduceTensorSum";
  KILN_RETURN_IF_ERROR(CheckBroadcastable(dbd, "db", dyd, "dy", where));
  if (dbd.dtype != DataType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": db must be f32"));
  }
  cuda::ReduceCall r = internal::ReduceOver(cuda::ReduceOp::kSum, dyd, dy, nullptr, nullptr,
                                            internal::KeptDims(dbd, dyd), dbd);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  r.dense = nullptr;
  r.alpha = alpha;
  r.beta = beta;
  r.out0 = static_cast<float*>(db);
  return LaunchStatus(cuda::LaunchReduce(r, handle.stream()), where);
}

size_t ReduceTensorDotWorkspaceSize(const TensorDescriptor& ad, const TensorDescriptor& dbd) {
  if (dbd.rank() != ad.rank()) return 0;
  return internal::ReduceWorkspaceBytesForAnyOperands(internal::ReduceOver(
      cuda::ReduceOp::kDot, ad, nullptr, &ad, nullptr, internal::KeptDims(dbd, ad), dbd));
}

absl::Status ReduceTensorDot(Handle& handle, float alpha, const TensorDescriptor& ad, const void* a,
                             const TensorDescriptor& bd, const void* b, float beta,
                             const TensorDescriptor& dbd, void* db, void* workspace,
                             size_t workspace_bytes) {
  const char* where = "ReduceTensorDot";
  KILN_RETURN_IF_ERROR(CheckSameShape(ad, "a", bd, "b", where));
  if (ad.dtype != bd.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a is ", DataTypeName(ad.dtype),
                                                   " but b is ", DataTypeName(bd.dtype)));
  }
  KILN_RETURN_IF_ERROR(CheckBroadcastable(dbd, "db", ad, "a", where));
  if (dbd.dtype != DataType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": db must be f32"));
  }
  cuda::ReduceCall r =
      internal::ReduceOver(cuda::ReduceOp::kDot, ad, a, &bd, b, internal::KeptDims(dbd, ad), dbd);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  r.dense = nullptr;
  r.alpha = alpha;
  r.beta = beta;
  r.out0 = static_cast<float*>(db);
  return LaunchStatus(cuda::LaunchReduce(r, handle.stream()), where);
}

absl::Status EltwiseForward(Handle& handle, EltwiseOp op, const std::vector<double>& coefficients,
                            float alpha, const std::vector<TensorDescriptor>& xds,
                            const std::vector<const void*>& xs, float beta,
                            const TensorDescriptor& yd, void* y,
                            const ActivationDescriptor* then_activation) {
  const char* where = "EltwiseForward";
  KILN_RETURN_IF_ERROR(CheckEltwise(op, xds, coefficients, yd, where));
  if (xs.size() != xds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", xs.size(), " pointers for ", xds.size(), " descriptors"));
  }
  const ElementwiseOp kind = op == EltwiseOp::kSum    ? ElementwiseOp::kEltwiseSum
                             : op == EltwiseOp::kProd ? ElementwiseOp::kEltwiseProd
                                                      : ElementwiseOp::kEltwiseMax;
  cuda::ElementwiseCall c = ElementwiseOver(kind, yd, y, alpha, beta);
  for (size_t i = 0; i < xs.size(); ++i) {
    AddInput(c, OperandOf(xds[i], xs[i]));
    c.coef[i] = coefficients.empty() ? 1.0f : static_cast<float>(coefficients[i]);
  }
  if (then_activation != nullptr) {
    c.then_activation = true;
    c.act = internal::ActivationParamsOf(*then_activation);
  }
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

absl::Status EltwiseBackward(Handle& handle, EltwiseOp op, const std::vector<double>& coefficients,
                             int which, float alpha, const std::vector<TensorDescriptor>& xds,
                             const std::vector<const void*>& xs, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dxd, void* dx) {
  const char* where = "EltwiseBackward";
  KILN_RETURN_IF_ERROR(CheckEltwise(op, xds, coefficients, dyd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(dyd, "dy", dxd, "dx", where));
  if (which < 0 || which >= static_cast<int>(xds.size()) || xs.size() != xds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": input ", which, " of ", xds.size(), " (", xs.size(), " pointers)"));
  }
  if (op == EltwiseOp::kSum) {  // a scaled copy of dy
    const float coef = coefficients.empty() ? 1.0f : static_cast<float>(coefficients[which]);
    return TransformTensor(handle, alpha * coef, dyd, dy, beta, dxd, dx);
  }
  cuda::ElementwiseCall c =
      ElementwiseOver(op == EltwiseOp::kProd ? ElementwiseOp::kEltwiseProdGradient
                                             : ElementwiseOp::kEltwiseMaxGradient,
                      dxd, dx, alpha, beta);
  for (size_t i = 0; i < xs.size(); ++i) AddInput(c, OperandOf(xds[i], xs[i]));
  AddInput(c, OperandOf(dyd, dy));
  c.which = which;
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

absl::Status ConcatForward(Handle& handle, int axis, const std::vector<TensorDescriptor>& parts,
                           const std::vector<const void*>& part_data, const TensorDescriptor& yd,
                           void* y) {
  KILN_RETURN_IF_ERROR(CheckConcat(axis, parts, yd, "ConcatForward"));
  if (part_data.size() != parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ConcatForward: ", part_data.size(),
                                                   " pointers for ", parts.size(), " parts"));
  }
  int64_t at = 0;
  for (size_t i = 0; i < parts.size() && i < part_data.size(); ++i) {
    const SubTensor sub = SliceAlong(yd, axis, at, parts[i].dims[axis]);
    KILN_RETURN_IF_ERROR(TransformTensor(handle, 1, parts[i], part_data[i], 0, sub.desc,
                                         const_cast<void*>(At(y, yd.dtype, sub.offset))));
    at += parts[i].dims[axis];
  }
  return absl::OkStatus();
}

absl::Status SliceForward(Handle& handle, int axis, const TensorDescriptor& xd, const void* x,
                          const std::vector<TensorDescriptor>& parts,
                          const std::vector<void*>& part_data) {
  KILN_RETURN_IF_ERROR(CheckConcat(axis, parts, xd, "SliceForward"));
  if (part_data.size() != parts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SliceForward: ", part_data.size(), " pointers for ", parts.size(), " parts"));
  }
  int64_t at = 0;
  for (size_t i = 0; i < parts.size() && i < part_data.size(); ++i) {
    const SubTensor sub = SliceAlong(xd, axis, at, parts[i].dims[axis]);
    KILN_RETURN_IF_ERROR(TransformTensor(handle, 1, sub.desc, At(x, xd.dtype, sub.offset), 0,
                                         parts[i], part_data[i]));
    at += parts[i].dims[axis];
  }
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
