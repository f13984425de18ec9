// KernelRegistry: an object (never global) holding KernelFactories by op and backend.
#ifndef KILN_KERNELS_KERNEL_REGISTRY_H_
#define KILN_KERNELS_KERNEL_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"

namespace kiln {

class KernelRegistry {
 public:
  // AlreadyExists when a kernel of the same name is registered.
  absl::Status Register(KernelFactory factory);

  // The highest-priority factory of `backend` that can implement `node`, or Unimplemented
  // listing every candidate and why it declined.
  absl::StatusOr<const KernelFactory*> Select(const Node& node, Backend backend) const;

  // Every factory for `op` (all backends), ordered by name.
  std::vector<const KernelFactory*> ForOp(absl::string_view op) const;
  std::vector<const KernelFactory*> All() const;

 private:
  std::map<std::string, KernelFactory> by_name_;
};

}  // namespace kiln

#endif  // KILN_KERNELS_KERNEL_REGISTRY_H_
