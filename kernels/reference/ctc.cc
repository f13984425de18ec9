// Reference CTCLoss and CTCLossGradient (ops/ctc_ops.cc) over the CTC primitive's CPU reference
// (dnn/ctc/ctc_loss.h, double precision). The padded [N, L] labels and the f32 lengths become the
// primitive's host arrays here; every value that is not an integer in its range is refused with
// InvalidArgument naming the node and the element, before the primitive runs.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/ctc/ctc_loss.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

// The primitive's call for one node: its descriptor and the host arrays its spans view.
struct CtcCall {
  dnn::CtcLossDescriptor desc;
  dnn::CtcLossInputs in;
  std::vector<int32_t> labels, label_lengths, input_lengths;
};

// v as an integer in [0, limit], or InvalidArgument naming `what` (already indexed).
absl::StatusOr<int32_t> IndexIn(const Node& node, const std::string& what, float v, int64_t limit) {
  if (!(v >= 0) || v > static_cast<float>(limit) || std::floor(v) != v) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(),
                                                   "): ", what, " = ", v,
                                                   " is not an integer in [0, ", limit, "]"));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<CtcCall> CallOf(const Node& node, const DenseArgs& a) {
  const TensorType& x = a.in_types[0];
  const int64_t T = x.dim(0), N = x.dim(1), C = x.dim(2), L = a.in_types[1].dim(1);
  CtcCall c;
  c.desc.blank = static_cast<int32_t>(node.GetInt("blank"));
  c.desc.reduction = node.GetString("reduction") == "sum" ? dnn::CtcReduction::kSum
                                                          : dnn::CtcReduction::kMeanByTargetLength;
  c.desc.zero_infinity = node.GetBool("zero_infinity");
  if (node.def().FindAttr("loss_weight") != nullptr) {
    c.desc.grad_scale = static_cast<float>(node.GetFloat("loss_weight"));
  }
  const std::string where = absl::StrCat("node '", node.name(), "' (", node.op(), "): ");
  for (int64_t n = 0; n < N; ++n) {
    KILN_ASSIGN_OR_RETURN(int32_t tn,
                          IndexIn(node, absl::StrCat("input_lengths[", n, "]"), a.in[2][n], T));
    KILN_ASSIGN_OR_RETURN(int32_t ln,
                          IndexIn(node, absl::StrCat("label_lengths[", n, "]"), a.in[3][n], L));
    // The primitive's limit (its GPU kernel keeps a label's classes in shared memory); both
    // backends refuse the same inputs.
    if (ln > dnn::kCtcMaxLabelLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, "label_lengths[", n, "] = ", ln,
                                                     " exceeds ", dnn::kCtcMaxLabelLength,
                                                     ", the longest label CTC takes"));
    }
    c.input_lengths.push_back(tn);
    c.label_lengths.push_back(ln);
    for (int32_t i = 0; i < ln; ++i) {
      const std::string what = absl::StrCat("labels[", n, ", ", i, "]");
      KILN_ASSIGN_OR_RETURN(int32_t label, IndexIn(node, what, a.in[1][n * L + i], C - 1));
      if (label == c.desc.blank) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, what, " = ", label, " is the blank (labels exclude it)"));
      }
      c.labels.push_back(label);
    }
  }
  c.in.dtype = DataType::kF32;
  c.in.max_time = T;
  c.in.batch = N;
  c.in.classes = C;
  c.in.labels = c.labels;
  c.in.label_lengths = c.label_lengths;
  c.in.input_lengths = c.input_lengths;
  return c;
}

// Runs the primitive's reference in double; `grad` (T N C values) may be null.
absl::Status Run(const Node& node, const DenseArgs& a, double* loss, std::vector<double>* grad) {
  KILN_ASSIGN_OR_RETURN(CtcCall c, CallOf(node, a));
  const int64_t count = a.in_types[0].num_elements();
  std::vector<double> x(a.in[0], a.in[0] + count);
  if (grad != nullptr) grad->assign(count, 0.0);
  absl::Status s =
      dnn::reference::CtcLoss(c.desc, c.in, x.data(), loss, grad ? grad->data() : nullptr);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("node '", node.name(), "': ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CtcLoss(const Node& node, const DenseArgs& a) {
  double loss = 0;
  KILN_RETURN_IF_ERROR(Run(node, a, &loss, nullptr));
  a.out[0][0] = static_cast<float>(loss);
  return absl::OkStatus();
}

absl::Status CtcLossGradient(const Node& node, const DenseArgs& a) {
  double loss = 0;
  std::vector<double> grad;
  KILN_RETURN_IF_ERROR(Run(node, a, &loss, &grad));
  for (size_t i = 0; i < grad.size(); ++i) a.out[0][i] = static_cast<float>(grad[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceCtc(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "CTCLoss", CtcLoss));
  return RegisterReference(registry, "CTCLossGradient", CtcLossGradient);
}

}  // namespace kiln
