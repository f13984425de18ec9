// The CPU oracle of softmax (accurate and log, over any axes) and SoftmaxWithLoss.
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "dnn/tensor_index.h"

namespace kiln {
namespace dnn {
namespace reference {

namespace {

// Calls row(offsets_of(tensor strides)) once per softmax row: the outer index runs over the
// dims outside [first, last], the row over the dims inside.
template <class F>
void ForEachRow(const Desc& d, int first, int last, F row) {
  std::vector<int64_t> outer = d.dims, inner;
  for (int i = first; i <= last; ++i) {
    inner.push_back(d.dims[i]);
    outer[i] = 1;
  }
  ForEachIndex(outer, [&](const std::vector<int64_t>& o) {
    std::vector<std::vector<int64_t>> indices;
    ForEachIndex(inner, [&](const std::vector<int64_t>& r) {
      std::vector<int64_t> at = o;
      for (int i = first; i <= last; ++i) at[i] = r[i - first];
      indices.push_back(at);
    });
    row(indices);
  });
}

}  // namespace

absl::Status SoftmaxForward(const SoftmaxDescriptor& softmax, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y) {
  KILN_RETURN_IF_ERROR(CheckSoftmax(softmax, xd, "SoftmaxForward"));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "SoftmaxForward"));
  ForEachRow(xd, softmax.first_axis, softmax.last_axis, [&](const auto& row) {
    double mx = -INFINITY, sum = 0;
    for (const auto& i : row) mx = std::max(mx, x[OffsetOf(xd.strides, i)]);
    for (const auto& i : row) sum += std::exp(x[OffsetOf(xd.strides, i)] - mx);
    for (const auto& i : row) {
      const double v = x[OffsetOf(xd.strides, i)] - mx;
      Blend(alpha,
            softmax.algorithm == SoftmaxAlgorithm::kLog ? v - std::log(sum) : std::exp(v) / sum,
            beta, y + OffsetOf(yd.strides, i));
    }
  });
  return absl::OkStatus();
}

absl::Status SoftmaxBackward(const SoftmaxDescriptor& softmax, double alpha, const Desc& yd,
                             const double* y, const Desc& dyd, const double* dy, double beta,
                             const Desc& dxd, double* dx) {
  const char* where = "SoftmaxBackward";
  KILN_RETURN_IF_ERROR(CheckSoftmax(softmax, yd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dxd, "dx", where));
  const bool log = softmax.algorithm == SoftmaxAlgorithm::kLog;
  ForEachRow(yd, softmax.first_axis, softmax.last_axis, [&](const auto& row) {
    double dot = 0;
    for (const auto& i : row) {
      dot += dy[OffsetOf(dyd.strides, i)] * (log ? 1.0 : y[OffsetOf(yd.strides, i)]);
    }
    for (const auto& i : row) {
      const double yi = y[OffsetOf(yd.strides, i)], g = dy[OffsetOf(dyd.strides, i)];
      Blend(alpha, log ? g - std::exp(yi) * dot : yi * (g - dot), beta,
            dx + OffsetOf(dxd.strides, i));
    }
  });
  return absl::OkStatus();
}

namespace {

// Caffe's normalizer, never below 1.
double Normalizer(const SoftmaxLossDescriptor& loss, const Desc& labeld, int64_t valid) {
  double n = 1;
  switch (loss.normalization) {
    case LossNormalization::kFull:
      n = static_cast<double>(labeld.ElementCount());
      break;
    case LossNormalization::kValid:
      n = static_cast<double>(valid);
      break;
    case LossNormalization::kBatchSize: {
      int64_t outer = 1;
      for (int i = 0; i < loss.axis; ++i) outer *= labeld.dims[i];
      n = static_cast<double>(outer);
      break;
    }
    case LossNormalization::kNone:
      n = 1;
      break;
  }
  return std::max(1.0, n);
}

// The label at `index` of the label tensor as a class, or -1 when ignored; InvalidArgument when
// out of range.
absl::StatusOr<int64_t> LabelAt(const SoftmaxLossDescriptor& loss, const Desc& labeld,
                                const double* labels, const std::vector<int64_t>& index,
                                int64_t classes, const char* where) {
  const double v = labels[OffsetOf(labeld.strides, index)];
  const int64_t label = static_cast<int64_t>(v);
  if (loss.has_ignore_label && label == loss.ignore_label) return -1;
  if (!(v >= 0) || label >= classes) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": label ", v, " is outside [0, ", classes, ")"));
  }
  return label;
}

}  // namespace

absl::Status SoftmaxLossForward(const SoftmaxLossDescriptor& loss, const Desc& xd, const double* x,
                                const Desc& labeld, const double* labels, const Desc& probd,
                                double* prob, double* loss_value) {
  const char* where = "SoftmaxLossForward";
  KILN_RETURN_IF_ERROR(CheckSoftmaxLoss(loss, xd, labeld, where));
  KILN_RETURN_IF_ERROR(SoftmaxForward(
      SoftmaxDescriptor::Axis(SoftmaxAlgorithm::kAccurate, loss.axis), 1, xd, x, 0, probd, prob));
  double total = 0;
  int64_t valid = 0;
  absl::Status status;
  ForEachIndex(labeld.dims, [&](const std::vector<int64_t>& i) {
    absl::StatusOr<int64_t> label = LabelAt(loss, labeld, labels, i, xd.dims[loss.axis], where);
    if (!label.ok()) {
      status.Update(label.status());
      return;
    }
    if (*label < 0) return;
    std::vector<int64_t> at = i;
    at[loss.axis] = *label;
    total -= std::log(std::max(prob[OffsetOf(probd.strides, at)], static_cast<double>(FLT_MIN)));
    ++valid;
  });
  KILN_RETURN_IF_ERROR(status);
  *loss_value = total / Normalizer(loss, labeld, valid);
  return absl::OkStatus();
}

absl::Status SoftmaxLossBackward(const SoftmaxLossDescriptor& loss, const Desc& probd,
                                 const double* prob, const Desc& labeld, const double* labels,
                                 double alpha, double beta, const Desc& dxd, double* dx) {
  const char* where = "SoftmaxLossBackward";
  KILN_RETURN_IF_ERROR(CheckSoftmaxLoss(loss, probd, labeld, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(probd, "prob", dxd, "dx", where));
  const int64_t classes = probd.dims[loss.axis];
  int64_t valid = 0;
  std::vector<int64_t> class_of;
  absl::Status status;
  ForEachIndex(labeld.dims, [&](const std::vector<int64_t>& i) {
    absl::StatusOr<int64_t> label = LabelAt(loss, labeld, labels, i, classes, where);
    if (!label.ok()) status.Update(label.status());
    class_of.push_back(label.ok() ? *label : -1);
    if (label.ok() && *label >= 0) ++valid;
  });
  KILN_RETURN_IF_ERROR(status);
  const double scale = loss.loss_weight / Normalizer(loss, labeld, valid);
  int64_t row = 0;
  ForEachIndex(labeld.dims, [&](const std::vector<int64_t>& i) {
    const int64_t label = class_of[row++];
    std::vector<int64_t> at = i;
    for (int64_t c = 0; c < classes; ++c) {
      at[loss.axis] = c;
      const double g = label < 0 ? 0.0 : scale * (prob[OffsetOf(probd.strides, at)] - (c == label));
      Blend(alpha, g, beta, dx + OffsetOf(dxd.strides, at));
    }
  });
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
