// The one visible list of kernel backends.
#ifndef KILN_KERNELS_ALL_KERNELS_H_
#define KILN_KERNELS_ALL_KERNELS_H_

#include "absl/status/status.h"
#include "kernels/kernel_registry.h"

namespace kiln {

// Registers the reference, CPU and CUDA kernels.
absl::Status RegisterAllKernels(KernelRegistry& registry);

// A registry with every kernel, built once and never mutated afterwards.
const KernelRegistry& DefaultKernelRegistry();

}  // namespace kiln

#endif  // KILN_KERNELS_ALL_KERNELS_H_
