// ArgMax as a graph kernel (kernels/cuda/argmax_kernels.cu): x of f32, f16 or bf16 in any
// layout (a channels-last plan's 4-d scores need no copy), the f32 output packed, as the op's
// shape rule makes it.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "kernels/cuda/argmax_launch.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/argmax_params.h"

namespace kiln {

namespace {

using cuda_graph::StorageOf;

absl::Status CheckArgMax(const Node& node) {
  const TensorType& y = node.output_types()[0];
  if (y.dtype() != DataType::kF32 || !y.IsContiguous()) {
    return absl::UnimplementedError(
        absl::StrCat("cuda ArgMax: output ", y.ToString(), " must be packed f32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareArgMax(const Node& node, const KernelOptions&) {
  if (cuda_graph::OutputIsEmpty(node)) return cuda_graph::NothingToDo();
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(ArgMaxGeometry g,
                        ArgMaxGeometryOf(x.dims(), node.GetInt("top_k"), node.GetInts("axis"),
                                         node.GetBool("out_max_val")));
  cuda::ArgMaxLaunch p;
  p.storage = StorageOf(x.dtype());
  p.rank = x.rank();
  for (int d = 0; d < x.rank(); ++d) {
    p.dims[d] = x.dim(d);
    p.strides[d] = x.stride(d);
  }
  p.has_axis = g.has_axis;
  p.axis = g.axis;
  p.outer = g.outer;
  p.dim = g.dim;
  p.inner = g.inner;
  p.top_k = g.top_k;
  p.out_max_val = g.out_max_val;
  cuda_graph::PreparedKernel k;
  k.description = absl::StrCat("top-", g.top_k, " of ", g.dim);
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    cuda::ArgMaxLaunch call = p;  // the prepared kernel may run in several contexts at once
    call.x = a.inputs[0].data;
    call.y = static_cast<float*>(a.outputs[0].data);
    const int error = cuda::LaunchArgMax(call, handle.stream());
    if (error != 0) return CudaStatus(error, "LaunchArgMax", __FILE__, __LINE__);
    return absl::OkStatus();
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaArgMaxKernels(KernelRegistry& registry) {
  return cuda_graph::RegisterGraphKernel(registry, "ArgMax", "any", "row_select", CheckArgMax,
                                         PrepareArgMax);
}

}  // namespace kiln
