// The helpers that the convolution paths (conv_paths.h) share: launch and cuBLAS status checks,
// cuBLAS types, and the implicit-GEMM launch description.
#include "dnn/cuda/conv/conv_paths.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "dnn/conv_gemm_views.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

absl::Status Launched(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(error))));
}

ConvGemmLaunch GemmLaunch(const ConvProblem& p, const GemmView& view, const void* a, const void* b,
                          void* c, float alpha, float beta) {
  ConvGemmLaunch l;
  l.view = view;
  l.element = ElementOf(p.dtype);
  l.math = MathOf(p);
  l.a = a;
  l.b = b;
  l.c = c;
  l.alpha = alpha;
  l.beta = beta;
  const int width = VectorWidth(p.dtype);
  l.vector_a = InnerVectorizable(view.a, width) && Aligned16(a) ? width : 1;
  l.vector_b = InnerVectorizable(view.b, width) && Aligned16(b) ? width : 1;
  l.a_lanes_along_k = InnerIsContiguous(view.a);
  l.b_lanes_along_k = InnerIsContiguous(view.b);
  return l;
}

cudaDataType_t CublasType(DataType t) {
  return t == DataType::kF16 ? CUDA_R_16F : (t == DataType::kBF16 ? CUDA_R_16BF : CUDA_R_32F);
}
cublasComputeType_t CublasCompute(const ConvProblem& p) {
  return p.dtype == DataType::kF32 && p.math == MathMode::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                : CUBLAS_COMPUTE_32F;
}

absl::Status CublasOk(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", cublasGetStatusString(s)));
}

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln
