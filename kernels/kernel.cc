#include "kernels/kernel.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

KernelChoice FixedChoice(size_t workspace_bytes, int in_place_input, int aliased_input) {
  KernelChoice choice;
  choice.workspace_bytes = workspace_bytes;
  choice.in_place_input = in_place_input;
  choice.aliased_input = aliased_input;
  return choice;
}

absl::StatusOr<std::unique_ptr<Kernel>> BuildChosen(const KernelFactory& factory, const Node& node,
                                                    const KernelChoice& choice) {
  if (!factory.build) {
    return absl::InternalError(absl::StrCat(factory.key.Name(), ": registered without build"));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, factory.build(node, choice));
  if (kernel == nullptr || kernel->WorkspaceBytes() != choice.workspace_bytes ||
      kernel->InPlaceInput() != choice.in_place_input ||
      kernel->AliasedInput() != choice.aliased_input) {
    return absl::InternalError(
        absl::StrCat(factory.key.Name(), " for node '", node.name(),
                     "': the built kernel does not match its choice (workspace ",
                     choice.workspace_bytes, " bytes, in-place input ", choice.in_place_input,
                     ", aliased input ", choice.aliased_input, ")"));
  }
  return kernel;
}

absl::StatusOr<std::unique_ptr<Kernel>> CreateKernel(const KernelFactory& factory, const Node& node,
                                                     const KernelOptions& options) {
  if (!factory.choose) {
    return absl::InternalError(absl::StrCat(factory.key.Name(), ": registered without choose"));
  }
  KILN_ASSIGN_OR_RETURN(KernelChoice choice, factory.choose(node, options));
  return BuildChosen(factory, node, choice);
}

}  // namespace kiln
