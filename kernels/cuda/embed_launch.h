// The CUDA kernels of Embed and EmbedGradient (kernels/cuda/embed_kernels.cc). Indices are f32
// (the precision pass keeps them); tables and data are f32, f16 or bf16 (cuda::Storage). Each
// launcher returns the launch's cudaError_t as an int (0 is success).
#ifndef KILN_KERNELS_CUDA_EMBED_LAUNCH_H_
#define KILN_KERNELS_CUDA_EMBED_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// y[m, j] = w[x[m], j] (+ bias[j]); a row whose index is not an integer in [0, rows) is NaN.
int LaunchEmbedForward(const float* x, int64_t count, const void* w, const void* bias, int64_t rows,
                       int64_t width, Storage storage, void* y, void* stream);
// dw[r, j] = Σ over m with x[m] == r, in m order, of dy[m, j] (f32 accumulation).
int LaunchEmbedBackward(const float* x, int64_t count, const void* dy, int64_t rows, int64_t width,
                        Storage storage, void* dw, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_EMBED_LAUNCH_H_
