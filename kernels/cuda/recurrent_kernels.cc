// RNN and RNNGradient (ops/recurrent_params.h) as graph kernels over the GPU RNN primitive
// (dnn/cuda/rnn/rnn.h), one layer in one direction or both, the node's weight tensors passed in
// place (RnnLayerParams, one per direction), so nothing is packed or copied.
//
// **Decision:** the RNN node's output does not carry the primitive's training reserve (the op
// layer cannot size a backend's buffer), so RNNGradient runs the training forward again into
// its own workspace before the two backward calls: one extra forward per step, the price of a
// graph whose ops know nothing of a backend. A reserve passed between the two nodes would save it.
#include <cuda_runtime_api.h>

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/rnn/rnn.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/recurrent_params.h"

namespace kiln {

namespace {

using cuda_graph::AlignedBytes;

absl::StatusOr<dnn::RnnProblem> ProblemOf(const Node& node, const RecurrentAttrs& a,
                                          const KernelOptions& options) {
  const TensorType& x = node.input(0).type();
  dnn::RnnProblem p;
  const dnn::RnnCell cell = a.cell == "lstm"       ? dnn::RnnCell::kLstm
                            : a.cell == "gru"      ? dnn::RnnCell::kGru
                            : a.cell == "rnn_relu" ? dnn::RnnCell::kRnnRelu
                                                   : dnn::RnnCell::kRnnTanh;
  const dnn::RnnBias bias = a.biases() == 2   ? dnn::RnnBias::kDouble
                            : a.biases() == 1 ? dnn::RnnBias::kInputOnly
                                              : dnn::RnnBias::kNone;
  KILN_ASSIGN_OR_RETURN(
      p.rnn, dnn::RnnDescriptor::Create(cell, x.dim(2), a.hidden_size, 1, a.bidirectional, bias));
  if (a.gate_order == "ifog") p.rnn.gate_order = dnn::RnnGateOrder::kIfog;
  p.dtype = x.dtype();
  p.math = options.allow_tf32 && x.dtype() == DataType::kF32 ? dnn::MathMode::kTf32
                                                             : dnn::MathMode::kFp32;
  KILN_ASSIGN_OR_RETURN(
      p.x, dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, x.dim(0), x.dim(1), x.dim(2)));
  KILN_ASSIGN_OR_RETURN(p.y, dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, x.dim(0),
                                                       x.dim(1), a.directions() * a.hidden_size));
  return p;
}

const void* InputOrNull(const KernelArgs& args, int index) {
  return index >= 0 ? args.inputs[index].data : nullptr;
}

// The weights of each direction (the forward's, then the reverse's), in place.
std::array<dnn::RnnLayerParams, 2> ParamsOf(const KernelArgs& args, const RecurrentPorts& p) {
  std::array<dnn::RnnLayerParams, 2> q;
  q[0].w_ih = args.inputs[p.w_ih].data;
  q[0].w_hh = args.inputs[p.w_hh].data;
  q[0].b_ih = InputOrNull(args, p.b_ih);
  q[0].b_hh = InputOrNull(args, p.b_hh);
  if (p.w_ih_r >= 0) {
    q[1].w_ih = args.inputs[p.w_ih_r].data;
    q[1].w_hh = args.inputs[p.w_hh_r].data;
    q[1].b_ih = InputOrNull(args, p.b_ih_r);
    q[1].b_hh = InputOrNull(args, p.b_hh_r);
  }
  return q;
}

void* OutputOrNull(const KernelArgs& args, int index) {
  return index >= 0 ? args.outputs[index].data : nullptr;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareRnn(const Node& node,
                                                      const KernelOptions& options) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(node, /*gradient=*/false));
  const RecurrentPorts p = RecurrentPortsOf(a);
  KILN_ASSIGN_OR_RETURN(dnn::RnnProblem problem, ProblemOf(node, a, options));
  KILN_ASSIGN_OR_RETURN(dnn::RnnBufferSizes sizes, dnn::RnnGetBufferSizes(problem));
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = AlignedBytes(sizes.workspace);
  k.description = absl::StrCat(a.cell, problem.math == dnn::MathMode::kTf32 ? " tf32" : "");
  k.run = [=](dnn::Handle& handle, const KernelArgs& args) -> absl::Status {
    const std::array<dnn::RnnLayerParams, 2> params = ParamsOf(args, p);
    dnn::RnnTensors t;
    t.x = args.inputs[p.x].data;
    t.params = params.data();
    t.cont = InputOrNull(args, p.cont);
    t.hx = InputOrNull(args, p.h0);
    t.cx = InputOrNull(args, p.c0);
    t.y = args.outputs[0].data;
    t.hy = args.outputs[1].data;
    t.cy = a.lstm() ? args.outputs[2].data : nullptr;
    t.workspace = args.workspace;
    t.workspace_bytes = sizes.workspace;
    return dnn::RnnForward(handle, problem, dnn::RnnForwardMode::kInference, t);
  };
  return k;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareRnnGradient(const Node& node,
                                                              const KernelOptions& options) {
  KILN_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(node, /*gradient=*/true));
  const RecurrentPorts p = RecurrentPortsOf(a);
  KILN_ASSIGN_OR_RETURN(dnn::RnnProblem problem, ProblemOf(node, a, options));
  KILN_ASSIGN_OR_RETURN(dnn::RnnBufferSizes sizes, dnn::RnnGetBufferSizes(problem));
  const size_t y_bytes = static_cast<size_t>(problem.y.elements()) * DataTypeSize(problem.dtype);
  // Workspace: the primitive's, the reserve, the recomputed y, and a zero dy when y gets none.
  const size_t reserve_at = AlignedBytes(sizes.workspace);
  const size_t y_at = reserve_at + AlignedBytes(sizes.reserve);
  const size_t dy_at = y_at + AlignedBytes(y_bytes);
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = dy_at + (a.has_dy ? 0 : AlignedBytes(y_bytes));
  k.description =
      absl::StrCat(a.cell, " backward", problem.math == dnn::MathMode::kTf32 ? " tf32" : "");
  // The weight gradients accumulate (cuDNN's add mode): zeroed first.
  std::vector<std::pair<int, size_t>> weight_grads;
  for (int out : {1, 2, p.db_ih, p.db_hh, p.dw_ih_r, p.dw_hh_r, p.db_ih_r, p.db_hh_r}) {
    if (out >= 0) weight_grads.push_back({out, node.output_types()[out].span_bytes()});
  }
  k.run = [=](dnn::Handle& handle, const KernelArgs& args) -> absl::Status {
    auto stream = static_cast<cudaStream_t>(handle.stream());
    char* ws = static_cast<char*>(args.workspace);
    const std::array<dnn::RnnLayerParams, 2> params = ParamsOf(args, p);
    std::array<dnn::RnnLayerGrads, 2> grads;
    grads[0].w_ih = args.outputs[1].data;
    grads[0].w_hh = args.outputs[2].data;
    grads[0].b_ih = OutputOrNull(args, p.db_ih);
    grads[0].b_hh = OutputOrNull(args, p.db_hh);
    grads[1].w_ih = OutputOrNull(args, p.dw_ih_r);
    grads[1].w_hh = OutputOrNull(args, p.dw_hh_r);
    grads[1].b_ih = OutputOrNull(args, p.db_ih_r);
    grads[1].b_hh = OutputOrNull(args, p.db_hh_r);
    for (const auto& [out, bytes] : weight_grads) {
      KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(args.outputs[out].data, 0, bytes, stream));
    }
    dnn::RnnTensors t;
    t.x = args.inputs[p.x].data;
    t.params = params.data();
    t.grads = grads.data();
    t.cont = InputOrNull(args, p.cont);
    t.hx = InputOrNull(args, p.h0);
    t.cx = InputOrNull(args, p.c0);
    t.y = ws + y_at;
    t.workspace = ws;
    t.workspace_bytes = sizes.workspace;
    t.reserve = ws + reserve_at;
    t.reserve_bytes = sizes.reserve;
    KILN_RETURN_IF_ERROR(dnn::RnnForward(handle, problem, dnn::RnnForwardMode::kTraining, t));
    if (a.has_dy) {
      t.dy = args.inputs[p.dy].data;
    } else {
      KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws + dy_at, 0, y_bytes, stream));
      t.dy = ws + dy_at;
    }
    t.dhy = InputOrNull(args, p.dh);
    t.dcy = InputOrNull(args, p.dc);
    t.dx = args.outputs[0].data;
    t.dhx = p.dh0 >= 0 ? args.outputs[p.dh0].data : nullptr;
    t.dcx = p.dc0 >= 0 ? args.outputs[p.dc0].data : nullptr;
    KILN_RETURN_IF_ERROR(dnn::RnnBackwardData(handle, problem, t));
    return dnn::RnnBackwardWeights(handle, problem, t);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaRecurrentKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "RNN", "any", "dnn_rnn",
                                                       cuda_graph::RequirePacked, PrepareRnn));
  return cuda_graph::RegisterGraphKernel(registry, "RNNGradient", "any", "dnn_rnn",
                                         cuda_graph::RequirePacked, PrepareRnnGradient);
}

}  // namespace kiln
