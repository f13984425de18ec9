#include "ops/all_ops.h"

#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"

namespace kiln {

absl::Status RegisterAllOps(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterGraphOps(registry));
  KILN_RETURN_IF_ERROR(RegisterConvolutionOps(registry));
  KILN_RETURN_IF_ERROR(RegisterPoolingOps(registry));
  KILN_RETURN_IF_ERROR(RegisterNormalizationOps(registry));
  KILN_RETURN_IF_ERROR(RegisterActivationOps(registry));
  KILN_RETURN_IF_ERROR(RegisterScaleOps(registry));
  KILN_RETURN_IF_ERROR(RegisterSoftmaxOps(registry));
  KILN_RETURN_IF_ERROR(RegisterInnerProductOps(registry));
  KILN_RETURN_IF_ERROR(RegisterTensorOps(registry));
  KILN_RETURN_IF_ERROR(RegisterEltwiseOps(registry));
  KILN_RETURN_IF_ERROR(RegisterLossOps(registry));
  KILN_RETURN_IF_ERROR(RegisterRecurrentOps(registry));
  KILN_RETURN_IF_ERROR(RegisterEmbedOps(registry));
  KILN_RETURN_IF_ERROR(RegisterTileOps(registry));
  KILN_RETURN_IF_ERROR(RegisterReductionOps(registry));
  KILN_RETURN_IF_ERROR(RegisterArgMaxOps(registry));
  KILN_RETURN_IF_ERROR(RegisterLstmUnitOps(registry));
  KILN_RETURN_IF_ERROR(RegisterCtcOps(registry));
  KILN_RETURN_IF_ERROR(RegisterChannelShuffleOps(registry));
  KILN_RETURN_IF_ERROR(RegisterGradientOps(registry));
  // Last: the gradient builders attach to the ops registered above.
  return RegisterAllGradients(registry);
}

const OpRegistry& DefaultOpRegistry() {
  // Built once and never mutated afterwards: an immutable shared instance, not a registry that
  // code registers into.
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    absl::Status s = RegisterAllOps(*r);
    KILN_CHECK(s.ok());
    return r;
  }();
  return *registry;
}

}  // namespace kiln
