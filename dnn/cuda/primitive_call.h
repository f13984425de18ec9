// Host helpers shared by the primitive API's .cc files: descriptors to launcher operands,
// per-feature reduction set-up and its workspace, and launch-error conversion.
#ifndef KILN_DNN_CUDA_PRIMITIVE_CALL_H_
#define KILN_DNN_CUDA_PRIMITIVE_CALL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {
namespace internal {

cuda::Storage StorageOf(DataType dtype);
// An operand over `d`'s dims (rank <= kMaxRank), strides copied; `broadcast_onto` zeroes the
// strides of dims where `d` has 1 and the full tensor more.
cuda::Operand OperandOf(const TensorDescriptor& d, const void* data);
cuda::Operand BroadcastOperandOf(const TensorDescriptor& d, const void* data,
                                 const TensorDescriptor& full);
// An element-wise call over `dims` writing `out`.
cuda::ElementwiseCall ElementwiseOver(cuda::ElementwiseOp op, const TensorDescriptor& out,
                                      void* out_data, float alpha, float beta);
void AddInput(cuda::ElementwiseCall& call, cuda::Operand operand);
// The launcher's form of an activation descriptor.
ActivationParams<float> ActivationParamsOf(const ActivationDescriptor& act);

// `d`'s strides in (N, C, D, H, W) order; a 2-d tensor gets a 0 stride for its unit D.
void Strides5(const TensorDescriptor& d, int64_t* out);
// For a tensor `reduced` broadcast onto `full`: which of full's dims it keeps (its features).
std::vector<bool> KeptDims(const TensorDescriptor& reduced, const TensorDescriptor& full);

// A per-feature reduction over `a` (and `b`, same dims): dims where `is_feature` holds are
// features (numbered row-major), the rest are summed; `param` gives the features' strides in the
// parameter tensors. `mask` (same dims, kGradientSums only) zeroes b where it is <= 0.
cuda::ReduceCall ReduceOver(cuda::ReduceOp op, const TensorDescriptor& a, const void* a_data,
                            const TensorDescriptor* b, const void* b_data,
                            const std::vector<bool>& is_feature, const TensorDescriptor& param,
                            const TensorDescriptor* mask = nullptr,
                            const void* mask_data = nullptr);
// Workspace a reduction over these descriptors needs: partial sums plus 6 dense f32 vectors.
size_t ReduceWorkspaceBytes(const cuda::ReduceCall& call);
// The same for any layout of the second operand and the mask: one whose strides differ from
// the first operand's moves a channels-last reduction off the rows kernel, whose split count
// differs. Workspace-size queries that see only x answer with this.
size_t ReduceWorkspaceBytesForAnyOperands(const cuda::ReduceCall& call);
// Points the call's partials and dense vectors into `workspace`; ResourceExhausted when small.
absl::Status BindReduceWorkspace(cuda::ReduceCall& call, void* workspace, size_t bytes,
                                 const char* where);
// Dense f32 vector `k` (0..5) of a bound reduction's workspace: 0..3 the kAffine parameters,
// 4 and 5 a recomputed mean and inverse std.
float* DenseVector(const cuda::ReduceCall& call, int k);

// Internal naming the launch and CUDA's message when `error` is not 0.
absl::Status LaunchStatus(int error, const char* where);

}  // namespace internal
}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_PRIMITIVE_CALL_H_
