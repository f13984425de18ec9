// Validation of primitive calls, shared by the CPU reference and the CUDA primitives so both
// accept and refuse exactly the same calls. Every function returns InvalidArgument prefixed with
// `where` (the primitive's name) and naming the tensor at fault.
#ifndef KILN_DNN_PRIMITIVE_CHECKS_H_
#define KILN_DNN_PRIMITIVE_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

// `b` has the dims and dtype of `a`.
absl::Status CheckSameShape(const TensorDescriptor& a, const char* a_name,
                            const TensorDescriptor& b, const char* b_name, const char* where);
// `b` has the rank of `a` and each of its dims is 1 or a's (it broadcasts onto `a`).
absl::Status CheckBroadcastable(const TensorDescriptor& b, const char* b_name,
                                const TensorDescriptor& a, const char* a_name, const char* where);
// `y` has the dims PoolingOutputDims gives for `x`, and x's dtype.
absl::Status CheckPooling(const PoolingDescriptor& pool, const TensorDescriptor& x,
                          const TensorDescriptor& y, const char* where);
// LRN wants rank >= 3 (N, C, spatial...).
absl::Status CheckLrn(const LrnDescriptor& lrn, const TensorDescriptor& x, const char* where);
// `param` is f32 with dims (1, C, 1, ...) for kSpatial or (1, C, spatial...) for kPerActivation.
absl::Status CheckBatchNormParam(BatchNormMode mode, const TensorDescriptor& x,
                                 const TensorDescriptor& param, const char* where);
// A batch-norm call: y (or dy) shaped as x, the parameter tensor as above, epsilon > 0.
absl::Status CheckBatchNorm(BatchNormMode mode, const TensorDescriptor& x,
                            const TensorDescriptor& y, const TensorDescriptor& param,
                            double epsilon, const char* where);
// 0 <= first_axis <= last_axis < rank.
absl::Status CheckSoftmax(const SoftmaxDescriptor& softmax, const TensorDescriptor& x,
                          const char* where);
// `labels` has x's dims with dims[axis] = 1 (any float dtype: labels are stored as numbers, as
// Caffe does).
absl::Status CheckSoftmaxLoss(const SoftmaxLossDescriptor& loss, const TensorDescriptor& x,
                              const TensorDescriptor& labels, const char* where);
// 1..kMaxEltwiseInputs inputs of y's shape; coefficients empty or one per input, sum only.
absl::Status CheckEltwise(EltwiseOp op, const std::vector<TensorDescriptor>& xs,
                          const std::vector<double>& coefficients, const TensorDescriptor& y,
                          const char* where);
// The parts have y's dims except along `axis`, where their dims add up to y's.
absl::Status CheckConcat(int axis, const std::vector<TensorDescriptor>& parts,
                         const TensorDescriptor& y, const char* where);

// The sub-tensor [offset, offset + extent) of `whole` along `axis`: its descriptor and the
// element offset of its first element.
struct SubTensor {
  TensorDescriptor desc;
  int64_t offset = 0;
};
SubTensor SliceAlong(const TensorDescriptor& whole, int axis, int64_t offset, int64_t extent);

// An inner product over x's dims from `axis` on (Caffe's InnerProduct): x is [M..., K...],
// w is [Nout, K] (or [K, Nout] when transposed), y is [M..., Nout], bias [Nout].
struct InnerProductShape {
  int64_t m = 0, k = 0, n = 0;
};
absl::StatusOr<InnerProductShape> CheckInnerProduct(int axis, bool transposed,
                                                    const TensorDescriptor& x,
                                                    const TensorDescriptor& w,
                                                    const TensorDescriptor& y, const char* where);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_PRIMITIVE_CHECKS_H_
