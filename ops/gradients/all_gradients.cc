#include "ops/gradients/all_gradients.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::Status RegisterAllGradients(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterNnGradients(registry));
  KILN_RETURN_IF_ERROR(RegisterPointwiseGradients(registry));
  KILN_RETURN_IF_ERROR(RegisterTensorGradients(registry));
  KILN_RETURN_IF_ERROR(RegisterLossGradients(registry));
  KILN_RETURN_IF_ERROR(RegisterRecurrentGradients(registry));
  for (const OpDef* def : registry.All()) {
    if (def->differentiable && !def->gradient) {
      return absl::InternalError(
          absl::StrCat("op '", def->name, "' is differentiable but has no gradient builder"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
