#include "kernels/all_kernels.h"

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

absl::Status RegisterAllKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReferenceKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCpuKernels(registry));
  return RegisterCudaKernels(registry);
}

const KernelRegistry& DefaultKernelRegistry() {
  static const KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry();
    absl::Status s = RegisterAllKernels(*r);
    KILN_CHECK(s.ok());
    return r;
  }();
  return *registry;
}

}  // namespace kiln
