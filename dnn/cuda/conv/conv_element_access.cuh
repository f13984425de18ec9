// Element access shared by the convolution helper kernels of conv_aux.cu and
// conv_direct_backward_data.cu: f32 loads and rounded stores of f32/f16/bf16 elements, the
// alpha/beta blend of a result into its destination, and the dispatch from ElementType to the
// C++ element type. CUDA only.
#ifndef KILN_DNN_CUDA_CONV_CONV_ELEMENT_ACCESS_CUH_
#define KILN_DNN_CUDA_CONV_CONV_ELEMENT_ACCESS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dnn/cuda/conv/conv_gemm_launch.h"

namespace kiln {
namespace cuda {
namespace conv_element {

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void StoreValue(float* p, float v) { *p = v; }
__device__ __forceinline__ void StoreValue(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void StoreValue(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}
// *p = alpha value + beta *p, the old value read only when beta is not 0 (it may be poison).
template <typename T>
__device__ __forceinline__ void Blend(T* p, float value, float alpha, float beta) {
  float out = alpha * value;
  if (beta != 0.0f) out += beta * Load(p);
  StoreValue(p, out);
}

// Calls f with a value of the element type's C++ type; returns what f returns (a cudaError_t).
template <typename F>
int Dispatch(ElementType e, F f) {
  switch (e) {
    case ElementType::kF32:
      return f(float{});
    case ElementType::kF16:
      return f(__half{});
    case ElementType::kBF16:
      return f(__nv_bfloat16{});
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace conv_element
}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_ELEMENT_ACCESS_CUH_
