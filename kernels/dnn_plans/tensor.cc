#include "kernels/dnn_plans/tensor.h"

#include <utility>

namespace kiln {
namespace dnn_plans {

OperandTypes OperandTypes::Of(const Node& node) {
  OperandTypes types;
  for (const Value& v : node.inputs()) types.in.push_back(v.type());
  types.out = node.output_types();
  return types;
}

absl::StatusOr<dnn::TensorDescriptor> DescriptorOf(const TensorType& type) {
  if (type.rank() == 0) return dnn::TensorDescriptor::Create(type.dtype(), {1}, {1});
  return dnn::TensorDescriptor::Create(type.dtype(), type.dims(), type.strides());
}

absl::StatusOr<dnn::TensorDescriptor> WithUnitDim(const dnn::TensorDescriptor& d, int at) {
  std::vector<int64_t> dims = d.dims, strides = d.strides;
  const int64_t stride = at < d.rank() ? d.strides[at] * d.dims[at] : 1;
  dims.insert(dims.begin() + at, 1);
  strides.insert(strides.begin() + at, stride);
  return dnn::TensorDescriptor::Create(d.dtype, std::move(dims), std::move(strides));
}

bool OutputIsEmpty(const OperandTypes& types) { return types.out[0].num_elements() == 0; }

}  // namespace dnn_plans
}  // namespace kiln
