// Pooling and LRN as graph kernels over the primitive library (row-tiled pooling for contiguous
// rows, channel-run LRN), any dtype and layout.
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/graph/graph_kernel.h"
#include "kernels/cuda/graph/graph_kernels.h"
#include "kernels/cuda/normalization.h"
#include "kernels/cuda/pooling.h"
#include "kernels/dnn/primitive_descriptors.h"
#include "ops/pooling_params.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

absl::Status CheckPooling(const Node& node) {
  const int rank = node.input(0).type().rank();
  if (rank != 4 && rank != 5) return absl::UnimplementedError("2-d and 3-d pooling only");
  return PoolingParams::Create(node.attrs(), node.input(0).type()).status();
}

// The node's pooling with its window, pads and strides resolved (global pooling and Caffe's ceil
// rounding are already decided by PoolingParams), so the primitive's floor rule gives exactly the
// node's output size.
absl::StatusOr<PreparedKernel> PreparePooling(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(PoolingParams p, PoolingParams::Create(node.attrs(), x));
  dnn::PoolingMode mode = dnn::PoolingMode::kMax;
  if (p.mode == PoolingMode::kAverageIncludePad) mode = dnn::PoolingMode::kAverageIncludePadding;
  if (p.mode == PoolingMode::kAverageExcludePad) mode = dnn::PoolingMode::kAverageExcludePadding;
  const std::string rounding = node.GetString("rounding");
  KILN_ASSIGN_OR_RETURN(
      dnn::PoolingDescriptor pool,
      dnn::PoolingDescriptor::Create(
          mode, p.kernel, p.pad, p.stride,
          rounding == "ceil" ? dnn::PoolingRounding::kCeil : dnn::PoolingRounding::kFloor));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, dnn::PoolingOutputDims(pool, xd));
  if (dims != yd.dims) {
    return absl::InternalError(absl::StrCat("cuda Pooling: the primitive gives ",
                                            DimsToString(dims), ", the node ",
                                            DimsToString(yd.dims)));
  }
  PreparedKernel k;
  k.run = [pool, xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (yd.ElementCount() == 0) return absl::OkStatus();
    return dnn::PoolingForward(handle, pool, 1.0f, xd, a.inputs[0].data, 0.0f, yd,
                               a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<PreparedKernel> PrepareLrn(const Node& node, const KernelOptions&) {
  const std::string& region = node.GetString("region");
  if (region != "across_channels" && region != "within_channel") {
    return absl::InvalidArgumentError(absl::StrCat("LRN region '", region, "'"));
  }
  KILN_ASSIGN_OR_RETURN(
      dnn::LrnDescriptor lrn,
      dnn::LrnDescriptor::Create(region == "across_channels" ? dnn::LrnMode::kAcrossChannels
                                                             : dnn::LrnMode::kWithinChannel,
                                 node.GetInt("local_size"), node.GetFloat("alpha"),
                                 node.GetFloat("beta"), node.GetFloat("k")));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.run = [lrn, xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (yd.ElementCount() == 0) return absl::OkStatus();
    return dnn::LrnForward(handle, lrn, 1.0f, xd, a.inputs[0].data, 0.0f, yd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "Pooling", "any", "dnn_pooling",
                                                       CheckPooling, PreparePooling));
  return cuda_graph::RegisterGraphKernel(
      registry, "LRN", "any", "dnn_lrn",
      [](const Node& node) -> absl::Status {
        const int rank = node.input(0).type().rank();
        if (node.GetString("region") == "within_channel" && rank != 4 && rank != 5) {
          return absl::UnimplementedError("within-channel LRN needs 2 or 3 spatial dims");
        }
        return absl::OkStatus();
      },
      PrepareLrn);
}

}  // namespace kiln
