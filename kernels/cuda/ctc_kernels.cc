// CTCLoss and CTCLossGradient as graph kernels over the CTC primitive's device kernels
// (dnn/cuda/ctc). Activations (and the gradient) are packed [T, N, C] of f32, f16 or bf16 with
// f32 math; labels and lengths are f32 (the precision pass keeps them). The primitive's API
// wants labels and lengths on the host, which a captured plan cannot copy back, so this adapter
// builds the primitive's records and tables on the device (kernels/cuda/ctc_launch.h) in a
// layout padded to the labels' L, then calls the primitive's launcher, then a finish kernel that
// writes the loss in the output's dtype and turns refused samples into NaN.
//
// Workspace, in 256-byte aligned regions: N sample records, 5 N L int32 tables, N refusal flags,
// T N f32 row log-sum-exps, N T (2 L + 1) f32 alphas (and as many betas for the gradient), N f64
// per-sample losses, the f32 reduced loss. The padding costs (2 L + 1) / (2 L_n + 1) over the
// primitive's own layout for short labels; it is what lets the plan size it without the data.
#include <climits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/ctc/ctc_loss.h"
#include "dnn/cuda/ctc/ctc_loss_launch.h"
#include "dnn/cuda/cuda_status.h"
#include "kernels/cuda/ctc_launch.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

using cuda_graph::StorageOf;

absl::Status CheckCtc(const Node& node) {
  KILN_RETURN_IF_ERROR(cuda_graph::RequirePacked(node));
  const char* names[] = {"labels", "input_lengths", "label_lengths"};
  for (int i = 1; i < 4; ++i) {
    if (node.input(i).type().dtype() != DataType::kF32) {
      return absl::UnimplementedError(absl::StrCat("cuda ", node.op(), ": ", names[i - 1], " ",
                                                   node.input(i).type().ToString(),
                                                   " must be f32 (16 bits cannot hold every "
                                                   "index)"));
    }
  }
  const int64_t n = node.input(0).type().dim(1), l = node.input(1).type().dim(1);
  // The gradient kernel keeps up to L classes per sample in shared memory (the primitive's
  // limit), and the tables' offsets are int32 on the device.
  if (l > dnn::kCtcMaxLabelLength) {
    return absl::UnimplementedError(absl::StrCat("cuda ", node.op(), ": labels are padded to L = ",
                                                 l, ", more than ", dnn::kCtcMaxLabelLength));
  }
  if (n * l > INT32_MAX / 5) {
    return absl::UnimplementedError(
        absl::StrCat("cuda ", node.op(), ": N L = ", n * l, " labels, at most ", INT32_MAX / 5));
  }
  return absl::OkStatus();
}

struct Workspace {
  size_t samples = 0, tables = 0, invalid = 0, lse = 0, alpha = 0, beta = 0, sample_loss = 0,
         loss = 0, total = 0;
};

Workspace WorkspaceFor(int64_t T, int64_t N, int64_t L, bool gradient) {
  using cuda_graph::AlignedBytes;
  Workspace w;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t start = at;
    at += AlignedBytes(bytes);
    return start;
  };
  const size_t n = static_cast<size_t>(N), t = static_cast<size_t>(T);
  const size_t states = static_cast<size_t>(N * T * (2 * L + 1));
  w.samples = take(n * sizeof(cuda::CtcSample));
  w.tables = take(5 * n * static_cast<size_t>(L) * sizeof(int32_t));
  w.invalid = take(n * sizeof(int32_t));
  w.lse = take(t * n * sizeof(float));
  w.alpha = take(states * sizeof(float));
  w.beta = take(gradient ? states * sizeof(float) : 0);
  w.sample_loss = take(n * sizeof(double));
  w.loss = take(sizeof(float));
  w.total = at;
  return w;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareCtc(const Node& node, const KernelOptions&) {
  const bool gradient = node.kind() == OpKind::kCTCLossGradient;
  const TensorType& x = node.input(0).type();
  const int64_t T = x.dim(0), N = x.dim(1), C = x.dim(2), L = node.input(1).type().dim(1);
  const Workspace w = WorkspaceFor(T, N, L, gradient);
  cuda::CtcGraphTables tables;
  tables.max_time = T;
  tables.batch = N;
  tables.classes = C;
  tables.padded_length = L;
  tables.blank = static_cast<int32_t>(node.GetInt("blank"));
  tables.reduction =
      node.GetString("reduction") == "sum" ? cuda::kCtcReduceSum : cuda::kCtcReduceMean;
  tables.grad_scale = gradient ? static_cast<float>(node.GetFloat("loss_weight")) : 1.0f;
  cuda::CtcCall call;
  call.type = StorageOf(x.dtype());
  call.max_time = T;
  call.batch = N;
  call.classes = C;
  call.blank = tables.blank;
  call.log_probs = false;  // the op's activations are unnormalised scores
  call.zero_infinity = node.GetBool("zero_infinity");
  call.reduction = tables.reduction;
  call.max_states = static_cast<int32_t>(2 * L + 1);
  call.max_unique = static_cast<int32_t>(L);
  const cuda::Storage out_type = StorageOf(node.output_types()[0].dtype());
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = w.total;
  k.description =
      gradient ? absl::StrCat("device tables, loss_weight ", tables.grad_scale) : "device tables";
  // The lambda fills copies: one prepared kernel may run on several threads at once.
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    char* ws = static_cast<char*>(a.workspace);
    cuda::CtcGraphTables t = tables;
    t.labels = static_cast<const float*>(a.inputs[1].data);
    t.input_lengths = static_cast<const float*>(a.inputs[2].data);
    t.label_lengths = static_cast<const float*>(a.inputs[3].data);
    t.samples = reinterpret_cast<cuda::CtcSample*>(ws + w.samples);
    t.tables = reinterpret_cast<int32_t*>(ws + w.tables);
    t.invalid = reinterpret_cast<int32_t*>(ws + w.invalid);
    int error = cuda::LaunchCtcGraphTables(t, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchCtcGraphTables", __FILE__, __LINE__);
    const int64_t NL = N * L;
    cuda::CtcCall c = call;
    c.activations = a.inputs[0].data;
    c.grad = gradient ? a.outputs[0].data : nullptr;
    c.losses = reinterpret_cast<float*>(ws + w.loss);
    c.samples = t.samples;
    c.labels = t.tables;
    c.sorted_pos = t.tables + NL;
    c.unique_class = t.tables + 2 * NL;
    c.unique_begin = t.tables + 3 * NL;
    c.unique_end = t.tables + 4 * NL;
    c.lse = reinterpret_cast<float*>(ws + w.lse);
    c.alpha = reinterpret_cast<float*>(ws + w.alpha);
    c.beta = reinterpret_cast<float*>(ws + w.beta);
    c.sample_loss = reinterpret_cast<double*>(ws + w.sample_loss);
    error = cuda::LaunchCtcLoss(c, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchCtcLoss", __FILE__, __LINE__);
    error = cuda::LaunchCtcGraphFinish(c.losses, t.invalid, T, N, C,
                                       gradient ? nullptr : a.outputs[0].data, out_type, c.grad,
                                       out_type, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchCtcGraphFinish", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaCtcKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "CTCLoss", "any", "alpha_beta",
                                                       CheckCtc, PrepareCtc));
  return cuda_graph::RegisterGraphKernel(registry, "CTCLossGradient", "any", "alpha_beta", CheckCtc,
                                         PrepareCtc);
}

}  // namespace kiln
