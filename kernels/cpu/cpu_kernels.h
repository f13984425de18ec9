// The fast CPU path: f32 Convolution (2-d, im2col + GEMM) and InnerProduct (GEMM), forward and
// backward, through OpenBLAS, which threads the GEMMs itself; 2-d Pooling and BiasGradient.
#ifndef KILN_KERNELS_CPU_CPU_KERNELS_H_
#define KILN_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// One registration function per op family, forward and backward ops together.
// Convolution forward and its backward data and filter (convolution_im2col.cc).
absl::Status RegisterCpuConvolution(KernelRegistry& registry);
// InnerProduct forward and its backward data and filter (inner_product_gemm.cc).
absl::Status RegisterCpuInnerProduct(KernelRegistry& registry);
// 2-d Pooling forward and backward (pooling_cpu.cc).
absl::Status RegisterCpuPooling(KernelRegistry& registry);
// BiasGradient (scale_cpu.cc).
absl::Status RegisterCpuScale(KernelRegistry& registry);

inline absl::Status RegisterCpuKernels(KernelRegistry& registry) {
  absl::Status s = RegisterCpuConvolution(registry);
  if (s.ok()) s = RegisterCpuInnerProduct(registry);
  if (s.ok()) s = RegisterCpuPooling(registry);
  return s.ok() ? RegisterCpuScale(registry) : s;
}

}  // namespace kiln

#endif  // KILN_KERNELS_CPU_CPU_KERNELS_H_
