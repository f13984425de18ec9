// Plain C++ entry points of the Winograd F(MxM, RxR) transforms (conv_winograd.cu): R = 3 or 5
// (p.filter), output tiles of M = `tile` = 2 (both R) or 4 (R = 3; forward transforms only), for
// f32 unit-stride, unit-dilation, ungrouped 2-d convolutions; P = (M + R - 1)^2 transform points
// take the place of the 16 below. Tiles: tiles_h x tiles_w per image, MxM outputs each, T = N
// tiles_h tiles_w in all, cut into S = ceil(T / chunk) chunks (the last one zero-padded) so that
// backward filter (M = 2) can split its long reduction over the tiles. Layouts, all dense f32:
// V[16][S][C][chunk], U[16][K][C], M[16][K][T] (forward, chunk = T), G[16][S][K][chunk],
// dU[16][S][K][C]. The caller keeps C x S x chunk and K x S x chunk below 2^31. Each returns the
// launch's cudaError_t as an int.
#ifndef KILN_DNN_CUDA_CONV_CONV_WINOGRAD_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_WINOGRAD_LAUNCH_H_

#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/conv_problem.h"

namespace kiln {
namespace cuda {

int LaunchWinogradInput(const dnn::ConvProblem& p, int tile, const float* x, int tiles_h,
                        int tiles_w, int chunk, float* v, void* stream);
// flip: true convolution (the filter's taps reversed).
int LaunchWinogradFilter(const dnn::ConvProblem& p, int tile, const float* w, bool flip, float* u,
                         void* stream);
// y = act(alpha * (the transformed-back products) + beta * y + bias[k]) over the output of `p`
// (conv_gemm_launch.h's OutputEpilogue; the default is none).
int LaunchWinogradOutput(const dnn::ConvProblem& p, int tile, const float* m, int tiles_h,
                         int tiles_w, float alpha, float beta, float* y, void* stream,
                         const OutputEpilogue& epilogue = {});

// Backward filter: G = A dy A^T per 2x2 dy tile (zero past the output's edge).
int LaunchWinogradGradient(const dnn::ConvProblem& p, const float* dy, int tiles_h, int tiles_w,
                           int chunk, float* g, void* stream);
// dw = alpha * G^T (dU summed over its chunks) G + beta * dw; flip: true convolution.
int LaunchWinogradFilterGradient(const dnn::ConvProblem& p, const float* du, int chunks, bool flip,
                                 float alpha, float beta, float* dw, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_WINOGRAD_LAUNCH_H_
