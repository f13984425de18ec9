// The fast CPU path: f32 Convolution (2-d, im2col + GEMM) and InnerProduct (GEMM), forward and
// backward, through OpenBLAS, which threads the GEMMs itself.
#ifndef KILN_KERNELS_CPU_CPU_KERNELS_H_
#define KILN_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

absl::Status RegisterCpuConvolution(KernelRegistry& registry);
absl::Status RegisterCpuInnerProduct(KernelRegistry& registry);
// The backward GEMMs of both (gradients_gemm.cc).
absl::Status RegisterCpuGradients(KernelRegistry& registry);
// 2-d Pooling forward and backward, BiasGradient (pooling_cpu.cc).
absl::Status RegisterCpuPooling(KernelRegistry& registry);

inline absl::Status RegisterCpuKernels(KernelRegistry& registry) {
  absl::Status s = RegisterCpuConvolution(registry);
  if (s.ok()) s = RegisterCpuInnerProduct(registry);
  if (s.ok()) s = RegisterCpuGradients(registry);
  return s.ok() ? RegisterCpuPooling(registry) : s;
}

}  // namespace kiln

#endif  // KILN_KERNELS_CPU_CPU_KERNELS_H_
