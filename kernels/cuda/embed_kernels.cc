// Embed and EmbedGradient as graph kernels (kernels/cuda/embed_kernels.cu): packed tensors, f32
// indices (the precision pass keeps an Embed's indices f32), a table of f32, f16 or bf16.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "kernels/cuda/embed_launch.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

using cuda_graph::StorageOf;

absl::Status CheckEmbed(const Node& node) {
  if (node.input(0).type().dtype() != DataType::kF32) {
    return absl::UnimplementedError(absl::StrCat("cuda ", node.op(), ": indices ",
                                                 node.input(0).type().ToString(),
                                                 " must be f32 (16 bits cannot hold every index)"));
  }
  return cuda_graph::RequirePacked(node);
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareEmbed(const Node& node, const KernelOptions&) {
  const int64_t count = node.input(0).type().num_elements();
  const TensorType& w = node.input(1).type();
  const int64_t rows = w.dim(0), width = w.dim(1);
  const bool bias = node.num_inputs() > 2;
  const cuda::Storage storage = StorageOf(w.dtype());
  cuda_graph::PreparedKernel k;
  k.description = "gather";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    const int error =
        cuda::LaunchEmbedForward(static_cast<const float*>(a.inputs[0].data), count,
                                 a.inputs[1].data, bias ? a.inputs[2].data : nullptr, rows, width,
                                 storage, a.outputs[0].data, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchEmbedForward", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareEmbedGradient(const Node& node,
                                                                const KernelOptions&) {
  const int64_t count = node.input(0).type().num_elements();
  const TensorType& dw = node.output_types()[0];
  const int64_t rows = dw.dim(0), width = dw.dim(1);
  const cuda::Storage storage = StorageOf(dw.dtype());
  cuda_graph::PreparedKernel k;
  k.description = "row scan";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    const int error = cuda::LaunchEmbedBackward(static_cast<const float*>(a.inputs[0].data), count,
                                                a.inputs[1].data, rows, width, storage,
                                                a.outputs[0].data, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchEmbedBackward", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaEmbedKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "Embed", "any", "gather",
                                                       CheckEmbed, PrepareEmbed));
  return cuda_graph::RegisterGraphKernel(registry, "EmbedGradient", "any", "row_scan", CheckEmbed,
                                         PrepareEmbedGradient);
}

}  // namespace kiln
