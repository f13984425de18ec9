// Plain C++ entry points of the Winograd F(2x2, 3x3) transforms (conv_winograd.cu) for f32 3x3
// unit-stride, unit-dilation, ungrouped 2-d convolutions. Tiles: tiles_h x tiles_w per image, 2x2
// outputs each. Layouts: V[16][C][N tiles], U[16][K][C], M[16][K][N tiles], all dense f32. The
// caller keeps C x N x tiles and K x N x tiles below 2^31. Each returns the launch's cudaError_t
// as an int.
#ifndef KILN_KERNELS_CUDA_CONV_WINOGRAD_LAUNCH_H_
#define KILN_KERNELS_CUDA_CONV_WINOGRAD_LAUNCH_H_

#include "kernels/dnn/conv_problem.h"

namespace kiln {
namespace cuda {

int LaunchWinogradInput(const dnn::ConvProblem& p, const float* x, int tiles_h, int tiles_w,
                        float* v, void* stream);
// flip: true convolution (the filter's taps reversed).
int LaunchWinogradFilter(const dnn::ConvProblem& p, const float* w, bool flip, float* u,
                         void* stream);
// y = alpha * (the transformed-back products) + beta * y over the output of `p`.
int LaunchWinogradOutput(const dnn::ConvProblem& p, const float* m, int tiles_h, int tiles_w,
                         float alpha, float beta, float* y, void* stream);

// Backward filter: G[16][K][N tiles] = A dy A^T per 2x2 dy tile (zero past the output's edge).
int LaunchWinogradGradient(const dnn::ConvProblem& p, const float* dy, int tiles_h, int tiles_w,
                           float* g, void* stream);
// dw = alpha * G^T dU G + beta * dw from dU[16][K][C]; flip: true convolution.
int LaunchWinogradFilterGradient(const dnn::ConvProblem& p, const float* du, bool flip, float alpha,
                                 float beta, float* dw, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CONV_WINOGRAD_LAUNCH_H_
