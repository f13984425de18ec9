#include "dnn/cuda/inner_product.h"

#include <cublas_v2.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

namespace {

// A tensor seen as a row-major matrix split at `axis`: `ld` is the row stride in elements.
struct Matrix {
  int64_t rows = 0, cols = 0, ld = 0;
};

absl::StatusOr<Matrix> AsMatrix(const TensorDescriptor& d, int axis, const char* name,
                                const char* where) {
  Matrix m{1, 1, 0};
  for (int i = 0; i < axis; ++i) m.rows *= d.dims[i];
  for (int i = axis; i < d.rank(); ++i) m.cols *= d.dims[i];
  bool ok = true;
  int64_t expect = 1;  // columns packed row-major
  for (int i = d.rank() - 1; i >= axis; --i) {
    if (d.dims[i] > 1 && d.strides[i] != expect) ok = false;
    expect *= d.dims[i];
  }
  m.ld = axis > 0 ? d.strides[axis - 1] : m.cols;
  for (int i = axis - 2; i >= 0; --i) {  // rows must collapse to one stride
    if (d.dims[i] > 1 && d.strides[i] != d.strides[i + 1] * d.dims[i + 1]) ok = false;
  }
  if (m.rows == 1) m.ld = m.cols;
  if (m.ld < m.cols) ok = false;
  if (!ok) {
    return absl::UnimplementedError(absl::StrCat(where, ": ", name, " ", d.ToString(),
                                                 " is not rows of packed elements (transform it "
                                                 "to a packed layout first)"));
  }
  return m;
}

cudaDataType_t CudaType(DataType dtype) {
  switch (dtype) {
    case DataType::kF16:
      return CUDA_R_16F;
    case DataType::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

cublasComputeType_t Compute(DataType dtype, MathMode math) {
  return dtype == DataType::kF32 && math == MathMode::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                            : CUBLAS_COMPUTE_32F;
}

// Column-major C (m x n, ldc) = alpha op(A) op(B) + beta C, as cuBLAS sees our row-major data.
absl::Status Gemm(Handle& h, DataType dtype, MathMode math, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
                  float beta, void* c, int64_t ldc, const char* where) {
  const int64_t limit = int64_t{1} << 31;
  if (m >= limit || n >= limit || k >= limit || lda >= limit || ldb >= limit || ldc >= limit) {
    return absl::UnimplementedError(absl::StrCat(where, ": a dimension exceeds cuBLAS's int"));
  }
  const cublasStatus_t s = cublasGemmEx(
      static_cast<cublasHandle_t>(h.cublas()), ta ? CUBLAS_OP_T : CUBLAS_OP_N,
      tb ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
      &alpha, a, CudaType(dtype), static_cast<int>(lda), b, CudaType(dtype), static_cast<int>(ldb),
      &beta, c, CudaType(dtype), static_cast<int>(ldc), Compute(dtype, math), CUBLAS_GEMM_DEFAULT);
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(where, ": cublasGemmEx failed: ", cublasGetStatusString(s)));
}

}  // namespace

absl::Status InnerProductForward(Handle& handle, int axis, bool transposed, MathMode math,
                                 float alpha, const TensorDescriptor& xd, const void* x,
                                 const TensorDescriptor& wd, const void* w, const void* bias,
                                 float beta, const TensorDescriptor& yd, void* y) {
  const char* where = "InnerProductForward";
  KILN_ASSIGN_OR_RETURN(InnerProductShape s,
                        CheckInnerProduct(axis, transposed, xd, wd, yd, where));
  KILN_ASSIGN_OR_RETURN(Matrix xm, AsMatrix(xd, axis, "x", where));
  KILN_ASSIGN_OR_RETURN(Matrix wm, AsMatrix(wd, 1, "w", where));
  KILN_ASSIGN_OR_RETURN(Matrix ym, AsMatrix(yd, axis, "y", where));
  // y^T (n x m) = op(w) (n x k) x^T (k x m).
  KILN_RETURN_IF_ERROR(Gemm(handle, xd.dtype, math, !transposed, false, s.n, s.m, s.k, alpha, w,
                            wm.ld, x, xm.ld, beta, y, ym.ld, where));
  if (bias == nullptr) return absl::OkStatus();
  // y += alpha bias, the bias broadcast over the rows.
  std::vector<int64_t> bdims(yd.rank(), 1), bstrides(yd.rank(), 0);
  bdims.back() = s.n;
  bstrides.back() = 1;
  KILN_ASSIGN_OR_RETURN(TensorDescriptor bd, TensorDescriptor::Create(wd.dtype, bdims, bstrides));
  return AddTensor(handle, alpha, bd, bias, 1, yd, y);
}

absl::Status InnerProductBackwardData(Handle& handle, int axis, bool transposed, MathMode math,
                                      float alpha, const TensorDescriptor& dyd, const void* dy,
                                      const TensorDescriptor& wd, const void* w, float beta,
                                      const TensorDescriptor& dxd, void* dx) {
  const char* where = "InnerProductBackwardData";
  KILN_ASSIGN_OR_RETURN(InnerProductShape s,
                        CheckInnerProduct(axis, transposed, dxd, wd, dyd, where));
  KILN_ASSIGN_OR_RETURN(Matrix xm, AsMatrix(dxd, axis, "dx", where));
  KILN_ASSIGN_OR_RETURN(Matrix wm, AsMatrix(wd, 1, "w", where));
  KILN_ASSIGN_OR_RETURN(Matrix ym, AsMatrix(dyd, axis, "dy", where));
  // dx^T (k x m) = op(w) (k x n) dy^T (n x m).
  return Gemm(handle, dxd.dtype, math, transposed, false, s.k, s.m, s.n, alpha, w, wm.ld, dy, ym.ld,
              beta, dx, xm.ld, where);
}

absl::Status InnerProductBackwardFilter(Handle& handle, int axis, bool transposed, MathMode math,
                                        float alpha, const TensorDescriptor& xd, const void* x,
                                        const TensorDescriptor& dyd, const void* dy, float beta,
                                        const TensorDescriptor& dwd, void* dw) {
  const char* where = "InnerProductBackwardFilter";
  KILN_ASSIGN_OR_RETURN(InnerProductShape s,
                        CheckInnerProduct(axis, transposed, xd, dwd, dyd, where));
  KILN_ASSIGN_OR_RETURN(Matrix xm, AsMatrix(xd, axis, "x", where));
  KILN_ASSIGN_OR_RETURN(Matrix wm, AsMatrix(dwd, 1, "dw", where));
  KILN_ASSIGN_OR_RETURN(Matrix ym, AsMatrix(dyd, axis, "dy", where));
  if (transposed) {  // dw [k, n]: dw^T (n x k) = dy^T (n x m) x (m x k)
    return Gemm(handle, xd.dtype, math, false, true, s.n, s.k, s.m, alpha, dy, ym.ld, x, xm.ld,
                beta, dw, wm.ld, where);
  }
  // dw [n, k]: dw^T (k x n) = x^T (k x m) dy (m x n).
  return Gemm(handle, xd.dtype, math, false, true, s.k, s.n, s.m, alpha, x, xm.ld, dy, ym.ld, beta,
              dw, wm.ld, where);
}

}  // namespace dnn
}  // namespace kiln
