// GEMM: each direction as batched cuBLAS products over matrices that the auxiliary kernels
// materialize (im2col, the dy matrix, the filter) and scatter back (col2im, alpha / beta), in
// chunks that bound the workspace.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/conv_paths.h"
#include "dnn/conv_gemm_views.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

namespace {

// The GEMM algorithms stage at most this many bytes of im2col/col2im matrix at a time.
constexpr int64_t kGemmChunkBytes = int64_t{512} << 20;

// Rows of a chunk so that `row_bytes` x rows stays within kGemmChunkBytes (and cuBLAS's int).
int64_t ChunkRows(int64_t total, int64_t row_bytes, int64_t row_elems) {
  int64_t rows = std::max<int64_t>(1, kGemmChunkBytes / std::max<int64_t>(1, row_bytes));
  rows = std::min<int64_t>(rows, (int64_t{1} << 31) / std::max<int64_t>(1, row_elems) - 1);
  return std::max<int64_t>(1, std::min(rows, total));
}

// D[g][r][c] = sum_k lhs[g][r][k] rhs[g][c][k] (+ D when accumulate), f32 D.
absl::Status BatchedGemm(Handle& h, const ConvProblem& p, int64_t rows, int64_t cols, int64_t k,
                         const void* lhs, const void* rhs, float* d, bool accumulate) {
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return CublasOk(
      cublasGemmStridedBatchedEx(
          static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(cols),
          static_cast<int>(rows), static_cast<int>(k), &one, rhs, CublasType(p.dtype),
          static_cast<int>(k), cols * k, lhs, CublasType(p.dtype), static_cast<int>(k), rows * k,
          &beta, d, CUDA_R_32F, static_cast<int>(cols), rows * cols, static_cast<int>(p.groups),
          CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

}  // namespace

GemmPlan PlanGemm(ConvDirection direction, const ConvProblem& p) {
  const int64_t e = ElementBytes(p.dtype), g = p.groups;
  const int64_t ctaps = p.cg() * p.FilterTaps();
  GemmPlan plan;
  switch (direction) {
    case ConvDirection::kForward: {
      plan.chunk = ChunkRows(p.OutputPixels(), g * (ctaps * e + p.kg() * 4), ctaps);
      plan.bytes = Align256(g * p.kg() * ctaps * e) + Align256(g * plan.chunk * ctaps * e) +
                   Align256(g * plan.chunk * p.kg() * 4);
      break;
    }
    case ConvDirection::kBackwardData: {
      const int64_t opq = p.out[0] * p.out[1] * p.out[2];
      plan.chunk = std::max<int64_t>(
          1, ChunkRows(p.OutputPixels(), g * (p.kg() * e + ctaps * 4), ctaps) / opq);
      plan.chunk = std::min(plan.chunk, p.n);
      const int64_t rows = plan.chunk * opq;
      plan.bytes = Align256(g * ctaps * p.kg() * e) + Align256(g * rows * p.kg() * e) +
                   Align256(g * rows * ctaps * 4);
      break;
    }
    case ConvDirection::kBackwardFilter: {
      plan.chunk = ChunkRows(p.OutputPixels(), g * (p.kg() + ctaps) * e, p.kg() + ctaps);
      plan.bytes = Align256(g * p.kg() * plan.chunk * e) + Align256(g * ctaps * plan.chunk * e) +
                   Align256(g * p.kg() * ctaps * 4);
      break;
    }
  }
  return plan;
}

absl::Status ForwardGemm(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                         const void* w, void* y, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kForward, p);
  const GemmView v = ForwardGemmView(p, false);
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups;
  char* w_mat = ws;
  char* a_mat = w_mat + Align256(g * v.n * v.k * eb);
  float* d = reinterpret_cast<float*>(a_mat + Align256(g * plan.chunk * v.k * eb));
  KILN_RETURN_IF_ERROR(Launched(
      cuda::LaunchMaterialize(v.b, e, w, g, true, 0, v.n, 0, v.k, w_mat, h.stream()), "filter"));
  for (int64_t m0 = 0; m0 < v.m; m0 += plan.chunk) {
    const int64_t rows = std::min(plan.chunk, v.m - m0);
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.a, e, x, g, true, m0, rows, 0, v.k, a_mat, h.stream()),
                 "im2col"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, rows, v.n, v.k, a_mat, w_mat, d, false));
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchScatter(v.c, e, d, g, m0, rows, v.n, alpha, beta, y, h.stream()), "scatter"));
  }
  return absl::OkStatus();
}

absl::Status BackwardDataGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                              const void* dy, const void* w, void* dx, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kBackwardData, p);
  const GemmView fwd = ForwardGemmView(p, false);          // b: [k][c, taps]
  const GemmView filt = BackwardFilterGemmView(p, false);  // a: [k][output pixel]
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups, kg = p.kg();
  const int64_t ctaps = fwd.k, opq = p.out[0] * p.out[1] * p.out[2];
  char* w_mat = ws;
  char* dy_mat = w_mat + Align256(g * ctaps * kg * eb);
  float* col = reinterpret_cast<float*>(dy_mat + Align256(g * plan.chunk * opq * kg * eb));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchMaterialize(fwd.b, e, w, g, false, 0, ctaps, 0, kg, w_mat, h.stream()),
               "filter"));
  for (int64_t n0 = 0; n0 < p.n; n0 += plan.chunk) {
    const int64_t images = std::min(plan.chunk, p.n - n0), rows = images * opq;
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchMaterialize(filt.a, e, dy, g, false, n0 * opq, rows, 0, kg, dy_mat, h.stream()),
        "dy matrix"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, rows, ctaps, kg, dy_mat, w_mat, col, false));
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchCol2Im(p, col, n0, images, e, alpha, beta, dx, h.stream()), "col2im"));
  }
  return absl::OkStatus();
}

absl::Status BackwardFilterGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                                const void* x, const void* dy, void* dw, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kBackwardFilter, p);
  const GemmView v = BackwardFilterGemmView(p, false);
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups;
  char* a_mat = ws;
  char* b_mat = a_mat + Align256(g * v.m * plan.chunk * eb);
  float* d = reinterpret_cast<float*>(b_mat + Align256(g * v.n * plan.chunk * eb));
  for (int64_t k0 = 0; k0 < v.k; k0 += plan.chunk) {
    const int64_t cols = std::min(plan.chunk, v.k - k0);
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.a, e, dy, g, true, 0, v.m, k0, cols, a_mat, h.stream()),
                 "dy matrix"));
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.b, e, x, g, true, 0, v.n, k0, cols, b_mat, h.stream()),
                 "im2col"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, v.m, v.n, cols, a_mat, b_mat, d, k0 > 0));
  }
  return Launched(cuda::LaunchScatter(v.c, e, d, g, 0, v.m, v.n, alpha, beta, dw, h.stream()),
                  "scatter");
}

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln
