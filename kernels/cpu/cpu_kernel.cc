#include "kernels/cpu/cpu_kernel.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"

namespace kiln {

absl::Status RegisterCpuKernel(KernelRegistry& registry, const char* op, const char* layout,
                               const char* algorithm,
                               std::function<absl::Status(const Node&)> check,
                               std::function<absl::StatusOr<Kernel*>(const Node&)> make,
                               std::function<size_t(const Node&)> workspace) {
  KernelFactory f;
  f.key = {op, Backend::kCpu, "f32", layout, algorithm};
  f.priority = 10;
  f.can_implement = std::move(check);
  f.choose = [workspace](const Node& node, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice(workspace ? workspace(node) : 0);
  };
  f.build = [make](const Node& node,
                   const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    KILN_ASSIGN_OR_RETURN(Kernel * k, make(node));
    return std::unique_ptr<Kernel>(k);
  };
  return registry.Register(std::move(f));
}

}  // namespace kiln
