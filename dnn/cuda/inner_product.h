// Caffe's InnerProduct on the GPU through cuBLAS: y = alpha (x w^T + bias) + beta y over x's dims
// from `axis` on, with its data and weight gradients (the bias gradient is ReduceTensorSum of dy
// onto [1, Nout]). f32 in strict FP32 or TF32 math, f16/bf16 with f32 accumulation. cuBLAS needs
// rows: x's dims from `axis` on, w's and y's rows must be packed (any row stride); other layouts
// get Unimplemented (TransformTensor them first).
#ifndef KILN_DNN_CUDA_INNER_PRODUCT_H_
#define KILN_DNN_CUDA_INNER_PRODUCT_H_

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"

namespace kiln {
namespace dnn {

// w is [Nout, K] (Caffe's layout), or [K, Nout] when `transposed`; bias (may be null) is Nout
// elements of w's dtype, packed.
absl::Status InnerProductForward(Handle& handle, int axis, bool transposed, MathMode math,
                                 float alpha, const TensorDescriptor& xd, const void* x,
                                 const TensorDescriptor& wd, const void* w, const void* bias,
                                 float beta, const TensorDescriptor& yd, void* y);
absl::Status InnerProductBackwardData(Handle& handle, int axis, bool transposed, MathMode math,
                                      float alpha, const TensorDescriptor& dyd, const void* dy,
                                      const TensorDescriptor& wd, const void* w, float beta,
                                      const TensorDescriptor& dxd, void* dx);
absl::Status InnerProductBackwardFilter(Handle& handle, int axis, bool transposed, MathMode math,
                                        float alpha, const TensorDescriptor& xd, const void* x,
                                        const TensorDescriptor& dyd, const void* dy, float beta,
                                        const TensorDescriptor& dwd, void* dw);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_INNER_PRODUCT_H_
