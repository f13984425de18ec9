// The terms each per-feature reduction adds for one element, shared by the reduction kernels
// (dnn_reduce.cu, dnn_reduce_rows.cu) so that every kernel means the same thing by an op.
#ifndef KILN_DNN_CUDA_REDUCE_TERMS_CUH_
#define KILN_DNN_CUDA_REDUCE_TERMS_CUH_

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// Adds element (a, b)'s terms to the running sums t0, t1 (b is dy for the gradient ops).
template <typename Acc>
__device__ __forceinline__ void AddTerms(ReduceOp op, Acc a, Acc b, Acc* t0, Acc* t1) {
  switch (op) {
    case ReduceOp::kMoments:
      *t0 += a;
      *t1 += a * a;
      break;
    case ReduceOp::kGradientSums:  // a = x, b = dy
      *t0 += b;
      *t1 += b * a;
      break;
    case ReduceOp::kSum:
      *t0 += a;
      break;
    case ReduceOp::kPReluSlope:  // a = x, b = dy
      *t0 += a <= 0 ? b * a : 0;
      break;
    case ReduceOp::kDot:
      *t0 += a * b;
      break;
  }
}

// Whether the op reads its second operand.
__host__ __device__ __forceinline__ bool ReadsSecond(ReduceOp op) {
  return op == ReduceOp::kGradientSums || op == ReduceOp::kPReluSlope || op == ReduceOp::kDot;
}

// Whether the op's second sum is used (the others leave t1 at 0).
__host__ __device__ __forceinline__ bool HasSecondSum(ReduceOp op) {
  return op == ReduceOp::kMoments || op == ReduceOp::kGradientSums;
}

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_REDUCE_TERMS_CUH_
