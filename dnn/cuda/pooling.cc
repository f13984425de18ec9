#include "dnn/cuda/pooling.h"

#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

namespace {

cuda::PoolingCall CallFor(const PoolingDescriptor& pool, const TensorDescriptor& xd,
                          const TensorDescriptor& yd, float alpha, float beta) {
  const PoolingDescriptor p = pool.ResolvedFor(xd);
  cuda::PoolingCall c;
  c.mode = static_cast<int>(p.mode);
  c.n = xd.dims[0];
  c.c = xd.dims[1];
  const int off = 3 - p.spatial_rank();
  for (int i = 0; i < p.spatial_rank(); ++i) {
    c.in[off + i] = xd.dims[2 + i];
    c.out[off + i] = yd.dims[2 + i];
    c.window[off + i] = p.window[i];
    c.stride[off + i] = p.strides[i];
    c.pad[off + i] = p.pads[i];
  }
  c.type = internal::StorageOf(xd.dtype);
  internal::Strides5(xd, c.x_strides);
  internal::Strides5(yd, c.y_strides);
  c.alpha = alpha;
  c.beta = beta;
  return c;
}

}  // namespace

absl::Status PoolingForward(Handle& handle, const PoolingDescriptor& pool, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y) {
  KILN_RETURN_IF_ERROR(CheckPooling(pool, xd, yd, "PoolingForward"));
  cuda::PoolingCall c = CallFor(pool, xd, yd, alpha, beta);
  c.x = x;
  c.result = y;
  return internal::LaunchStatus(cuda::LaunchPoolingForward(c, handle.stream()), "PoolingForward");
}

absl::Status PoolingBackward(Handle& handle, const PoolingDescriptor& pool, float alpha,
                             const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                             const void* dy, const TensorDescriptor& xd, const void* x, float beta,
                             const TensorDescriptor& dxd, void* dx) {
  const char* where = "PoolingBackward";
  KILN_RETURN_IF_ERROR(CheckPooling(pool, xd, yd, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(yd, "y", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  cuda::PoolingCall c = CallFor(pool, xd, yd, alpha, beta);
  internal::Strides5(dyd, c.dy_strides);
  internal::Strides5(dxd, c.dx_strides);
  c.x = x;
  c.y = y;
  c.dy = dy;
  c.result = dx;
  return internal::LaunchStatus(cuda::LaunchPoolingBackward(c, handle.stream()), where);
}

}  // namespace dnn
}  // namespace kiln
