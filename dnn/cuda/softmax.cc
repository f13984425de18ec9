#include "dnn/cuda/softmax.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

using internal::LaunchStatus;

namespace {

// Rows are indexed by the dims outside [first, last], elements by the dims inside; operands
// 0..2 are x (or y), dy and the output.
cuda::SoftmaxCall CallFor(const SoftmaxDescriptor& softmax, const TensorDescriptor* const ds[3]) {
  cuda::SoftmaxCall c;
  c.log = softmax.algorithm == SoftmaxAlgorithm::kLog;
  const TensorDescriptor& x = *ds[0];
  c.type = internal::StorageOf(x.dtype);
  for (int d = 0; d < x.rank(); ++d) {
    if (x.dims[d] == 1) continue;  // costs index arithmetic, changes nothing
    const bool in_row = d >= softmax.first_axis && d <= softmax.last_axis;
    const int k = in_row ? c.row_rank++ : c.outer_rank++;
    (in_row ? c.row_dims : c.outer_dims)[k] = x.dims[d];
    for (int t = 0; t < 3; ++t) {
      (in_row ? c.row_strides[t] : c.outer_strides[t])[k] = ds[t] ? ds[t]->strides[d] : 0;
    }
    (in_row ? c.row_length : c.rows) *= x.dims[d];
  }
  return c;
}

}  // namespace

absl::Status SoftmaxForward(Handle& handle, const SoftmaxDescriptor& softmax, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y) {
  const char* where = "SoftmaxForward";
  KILN_RETURN_IF_ERROR(CheckSoftmax(softmax, xd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  const TensorDescriptor* ds[3] = {&xd, nullptr, &yd};
  cuda::SoftmaxCall c = CallFor(softmax, ds);
  c.x = x;
  c.out = y;
  c.alpha = alpha;
  c.beta = beta;
  return LaunchStatus(cuda::LaunchSoftmaxForward(c, handle.stream()), where);
}

absl::Status SoftmaxBackward(Handle& handle, const SoftmaxDescriptor& softmax, float alpha,
                             const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dxd, void* dx) {
  const char* where = "SoftmaxBackward";
  KILN_RETURN_IF_ERROR(CheckSoftmax(softmax, yd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dxd, "dx", where));
  const TensorDescriptor* ds[3] = {&yd, &dyd, &dxd};
  cuda::SoftmaxCall c = CallFor(softmax, ds);
  c.x = y;
  c.dy = dy;
  c.out = dx;
  c.alpha = alpha;
  c.beta = beta;
  return LaunchStatus(cuda::LaunchSoftmaxBackward(c, handle.stream()), where);
}

namespace {

cuda::SoftmaxLossCall LossCallFor(const SoftmaxLossDescriptor& loss, const TensorDescriptor& probd,
                                  const TensorDescriptor& labeld) {
  cuda::SoftmaxLossCall c;
  c.rank = probd.rank();
  c.axis = loss.axis;
  c.classes = probd.dims[loss.axis];
  c.positions = labeld.ElementCount();
  for (int d = 0; d < c.rank; ++d) {
    c.pos_dims[d] = labeld.dims[d];
    c.prob_strides[d] = probd.strides[d];
    c.label_strides[d] = labeld.strides[d];
  }
  c.prob_type = internal::StorageOf(probd.dtype);
  c.label_type = internal::StorageOf(labeld.dtype);
  c.has_ignore = loss.has_ignore_label;
  c.ignore_label = loss.ignore_label;
  c.normalization = static_cast<int>(loss.normalization);
  c.loss_weight = static_cast<float>(loss.loss_weight);
  return c;
}

}  // namespace

absl::Status SoftmaxLossForward(Handle& handle, const SoftmaxLossDescriptor& loss,
                                const TensorDescriptor& xd, const void* x,
                                const TensorDescriptor& labeld, const void* labels,
                                const TensorDescriptor& probd, void* prob, void* loss_value) {
  const char* where = "SoftmaxLossForward";
  KILN_RETURN_IF_ERROR(CheckSoftmaxLoss(loss, xd, labeld, where));
  KILN_RETURN_IF_ERROR(
      SoftmaxForward(handle, SoftmaxDescriptor::Axis(SoftmaxAlgorithm::kAccurate, loss.axis), 1, xd,
                     x, 0, probd, prob));
  cuda::SoftmaxLossCall c = LossCallFor(loss, probd, labeld);
  c.prob = prob;
  c.labels = labels;
  c.loss = static_cast<float*>(loss_value);
  return LaunchStatus(cuda::LaunchSoftmaxLossForward(c, handle.stream()), where);
}

absl::Status SoftmaxLossBackward(Handle& handle, const SoftmaxLossDescriptor& loss,
                                 const TensorDescriptor& probd, const void* prob,
                                 const TensorDescriptor& labeld, const void* labels, float alpha,
                                 float beta, const TensorDescriptor& dxd, void* dx, void* workspace,
                                 size_t workspace_bytes) {
  const char* where = "SoftmaxLossBackward";
  KILN_RETURN_IF_ERROR(CheckSoftmaxLoss(loss, probd, labeld, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(probd, "prob", dxd, "dx", where));
  if (workspace == nullptr || workspace_bytes < sizeof(float)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": the workspace needs ", sizeof(float), " bytes"));
  }
  cuda::SoftmaxLossCall c = LossCallFor(loss, probd, labeld);
  for (int d = 0; d < c.rank; ++d) c.dx_strides[d] = dxd.strides[d];
  c.prob = prob;
  c.labels = labels;
  c.dx = dx;
  c.scratch = static_cast<float*>(workspace);
  c.alpha = alpha;
  c.beta = beta;
  return LaunchStatus(cuda::LaunchSoftmaxLossBackward(c, handle.stream()), where);
}

}  // namespace dnn
}  // namespace kiln
