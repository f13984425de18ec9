// What every plan function shares: the types it plans on, and tensor descriptors made from them.
#ifndef KILN_KERNELS_DNN_PLANS_TENSOR_H_
#define KILN_KERNELS_DNN_PLANS_TENSOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "ir/graph.h"

namespace kiln {
namespace dnn_plans {

// The types of a node's inputs and outputs as one backend holds them. The CUDA adapters plan on
// the node's own types (any strides, f32/f16/bf16); the reference kernels plan on the dense f32
// copies they compute on. The attributes always come from the node.
struct OperandTypes {
  std::vector<TensorType> in, out;

  static OperandTypes Of(const Node& node);
};

// The primitive library's descriptor of a type: same dtype, dims and strides. A rank-0 tensor
// (a loss) becomes the rank-1 tensor [1].
absl::StatusOr<dnn::TensorDescriptor> DescriptorOf(const TensorType& type);

// `d` with a dim of size 1 inserted before dim `at`; its stride is the dense one (it is never
// stepped along, but keeps the descriptor's strides ordered). How a plan runs a problem of lower
// rank on a primitive that wants more dims (1-d pooling as 2-d, LRN on [N, C]).
absl::StatusOr<dnn::TensorDescriptor> WithUnitDim(const dnn::TensorDescriptor& d, int at);

// True when output 0 has no elements: the descriptors refuse zero-sized dims, and such a node
// needs no work.
bool OutputIsEmpty(const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_TENSOR_H_
