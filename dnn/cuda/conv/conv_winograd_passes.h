// Winograd forward (and backward data, which runs as a forward) goes in passes whose transformed
// input and products stay within a budget of bytes (conv_winograd_paths.cc), so its workspace
// is bounded like the FFT's. These hooks let tests force several passes on small problems.
#ifndef KILN_DNN_CUDA_CONV_CONV_WINOGRAD_PASSES_H_
#define KILN_DNN_CUDA_CONV_CONV_WINOGRAD_PASSES_H_

#include <cstdint>

#include "dnn/cuda/conv/convolution.h"
#include "dnn/conv_problem.h"

namespace kiln {
namespace dnn {

// The budget of one pass's transformed input and products (128 MiB unless set).
void SetWinogradPassBytesForTesting(int64_t bytes);
// How many passes Winograd takes for `direction` of `p` under it (0 for backward filter, which
// cuts its tiles into chunks instead, or where Winograd does not serve `p`).
int64_t WinogradForwardPassesForTesting(ConvDirection direction, const ConvProblem& p);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_WINOGRAD_PASSES_H_
