// LSTMUnit and LSTMUnitGradient as graph kernels (kernels/cuda/lstm_unit_kernels.cu): packed
// tensors, data of f32, f16 or bf16, cont of any of them.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/cuda/lstm_unit_launch.h"

namespace kiln {

namespace {

using cuda_graph::StorageOf;

// The shapes both directions share: [T, N, D] c_prev, cont of its own dtype.
cuda::LstmUnitLaunch ShapeOf(const Node& node) {
  const TensorType& c_prev = node.input(0).type();
  cuda::LstmUnitLaunch p;
  p.rows = c_prev.dim(0) * c_prev.dim(1);
  p.width = c_prev.dim(2);
  p.storage = StorageOf(c_prev.dtype());
  p.cont_storage = StorageOf(node.input(2).type().dtype());
  return p;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareLstmUnit(const Node& node, const KernelOptions&) {
  const cuda::LstmUnitLaunch p = ShapeOf(node);
  cuda_graph::PreparedKernel k;
  k.description = "fused cell";
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    cuda::LstmUnitLaunch call = p;
    call.c_prev = a.inputs[0].data;
    call.x = a.inputs[1].data;
    call.cont = a.inputs[2].data;
    call.c = a.outputs[0].data;
    call.h = a.outputs[1].data;
    const int error = cuda::LaunchLstmUnitForward(call, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchLstmUnitForward", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareLstmUnitGradient(const Node& node,
                                                                   const KernelOptions&) {
  const cuda::LstmUnitLaunch p = ShapeOf(node);
  const bool has_dc = node.GetBool("has_dc"), has_dh = node.GetBool("has_dh");
  const int dh_input = has_dc ? 4 : 3;
  cuda_graph::PreparedKernel k;
  k.description = "fused cell backward";
  k.run = [p, has_dc, has_dh, dh_input](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    cuda::LstmUnitLaunch call = p;
    call.c_prev = a.inputs[0].data;
    call.x = a.inputs[1].data;
    call.cont = a.inputs[2].data;
    call.dc = has_dc ? a.inputs[3].data : nullptr;
    call.dh = has_dh ? a.inputs[dh_input].data : nullptr;
    call.dc_prev = a.outputs[0].data;
    call.dx = a.outputs[1].data;
    const int error = cuda::LaunchLstmUnitBackward(call, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchLstmUnitBackward", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaLstmUnitKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "LSTMUnit", "any", "fused",
                                                       cuda_graph::RequirePacked, PrepareLstmUnit));
  return cuda_graph::RegisterGraphKernel(registry, "LSTMUnitGradient", "any", "fused",
                                         cuda_graph::RequirePacked, PrepareLstmUnitGradient);
}

}  // namespace kiln
