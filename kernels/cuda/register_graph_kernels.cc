#include "base/status_macros.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterCudaConvolutionKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaInnerProductKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaActivationKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaDropoutKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaPoolingKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaLrnKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaBatchNormKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaScaleKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaSoftmaxKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaTensorKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaEltwiseKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaRecurrentKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaEmbedKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaCtcKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaTileKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaChannelShuffleKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaReductionKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaArgMaxKernels(registry));
  KILN_RETURN_IF_ERROR(RegisterCudaLstmUnitKernels(registry));
  return RegisterCudaLossKernels(registry);
}

}  // namespace kiln
