// ChannelShuffle (ops/channel_shuffle_ops.cc) as one strided copy (dnn::TransformTensor): x and y
// seen as [N, group, C / group, S] (S: the dims after C, merged), x with its channels in group
// order and y with them interleaved, each through its own strides. Any layout whose dims after
// C merge into one stride (NCHW and NHWC both) is copied as it is, so a channels-last plan pays
// no conversion around the shuffle.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

// The stride of the merged dims after C, or an error when they do not merge.
absl::StatusOr<int64_t> MergedSpatialStride(const TensorType& t) {
  for (int d = 2; d + 1 < t.rank(); ++d) {
    if (t.strides()[d] != t.strides()[d + 1] * t.dim(d + 1)) {
      return absl::UnimplementedError(
          absl::StrCat("cuda ChannelShuffle: the dims after C of ", t.ToString(), " do not merge"));
    }
  }
  return t.rank() > 2 ? t.strides()[t.rank() - 1] : 1;
}

// [N, group, C / group, S] over `t`; `interleaved`: channel j * group + i at (i, j), else
// i * (C / group) + j.
absl::StatusOr<dnn::TensorDescriptor> ShuffleView(const TensorType& t, int64_t group,
                                                  bool interleaved) {
  KILN_ASSIGN_OR_RETURN(int64_t spatial_stride, MergedSpatialStride(t));
  int64_t S = 1;
  for (int d = 2; d < t.rank(); ++d) S *= t.dim(d);
  const int64_t per = t.dim(1) / group, c = t.strides()[1];
  const std::vector<int64_t> strides =
      interleaved ? std::vector<int64_t>{t.strides()[0], c, group * c, spatial_stride}
                  : std::vector<int64_t>{t.strides()[0], per * c, c, spatial_stride};
  return dnn::TensorDescriptor::Create(t.dtype(), {t.dim(0), group, per, S}, strides);
}

absl::Status RequireMergeable(const Node& node) {
  KILN_RETURN_IF_ERROR(MergedSpatialStride(node.input(0).type()).status());
  return MergedSpatialStride(node.output_types()[0]).status();
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareChannelShuffle(const Node& node,
                                                                 const KernelOptions&) {
  const int64_t group = node.GetInt("group");
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor from,
                        ShuffleView(node.input(0).type(), group, false));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor to, ShuffleView(node.output_types()[0], group, true));
  cuda_graph::PreparedKernel k;
  k.description = absl::StrCat("strided copy, ", group, " groups");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    return dnn::TransformTensor(handle, 1.0f, from, a.inputs[0].data, 0.0f, to, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaChannelShuffleKernels(KernelRegistry& registry) {
  return cuda_graph::RegisterGraphKernel(registry, "ChannelShuffle", "any", "dnn_transform",
                                         RequireMergeable, PrepareChannelShuffle);
}

}  // namespace kiln
