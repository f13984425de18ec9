#include "kernels/cuda/convolution_in_dead_bytes.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace cuda_graph {

namespace {

// Workspaces start 256-byte aligned (the primitives place their parts at 256-byte offsets).
constexpr int64_t kAlign = 256;

char* AlignUp(char* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<char*>((v + kAlign - 1) / kAlign * kAlign);
}

// Bytes of one image when `t` is packed with the images outermost (NCHW or NHWC), else 0.
int64_t PackedImageBytes(const TensorType& t) {
  if (t.rank() < 3 || t.dim(0) < 1 || t.span_elements() != t.num_elements()) return 0;
  const int64_t per_image = t.num_elements() / t.dim(0);
  if (t.stride(0) != per_image) return 0;
  return per_image * static_cast<int64_t>(DataTypeSize(t.dtype()));
}

// `p` restricted to `n` of its images (from wherever x and y are made to start).
dnn::ConvProblem Images(const dnn::ConvProblem& p, int64_t n) {
  dnn::ConvProblem q = p;
  q.n = n;
  q.x_span = p.x_span - (p.n - n) * p.x_stride[0];
  q.y_span = p.y_span - (p.n - n) * p.y_stride[0];
  return q;
}

}  // namespace

std::optional<DeadBytesSplit> SplitForDeadBytes(const dnn::Handle& probe, const dnn::ConvProblem& p,
                                                dnn::ConvAlgo algo, const TensorType& x_buffer,
                                                const TensorType& y) {
  DeadBytesSplit split;
  split.x_image_bytes = PackedImageBytes(x_buffer);
  split.y_image_bytes = PackedImageBytes(y);
  if (p.n < 2 || split.x_image_bytes == 0 || split.y_image_bytes == 0 || x_buffer.dim(0) != p.n ||
      y.dim(0) != p.n) {
    return std::nullopt;
  }
  const int64_t element = static_cast<int64_t>(DataTypeSize(y.dtype()));
  if (p.x_stride[0] * element != split.x_image_bytes ||
      p.y_stride[0] * element != split.y_image_bytes) {
    return std::nullopt;
  }
  split.head = Images(p, p.n - 1);
  split.last = Images(p, 1);
  absl::StatusOr<size_t> head =
      dnn::GetConvolutionWorkspaceSize(probe, dnn::ConvDirection::kForward, split.head, algo);
  absl::StatusOr<size_t> last =
      dnn::GetConvolutionWorkspaceSize(probe, dnn::ConvDirection::kForward, split.last, algo);
  if (!head.ok() || !last.ok()) return std::nullopt;
  split.head_workspace = *head;
  split.last_workspace = *last;
  // Each region loses up to kAlign bytes to the aligned start.
  if (static_cast<int64_t>(*head) + kAlign > split.y_image_bytes ||
      static_cast<int64_t>(*last) + kAlign > (p.n - 1) * split.x_image_bytes) {
    return std::nullopt;
  }
  return split;
}

absl::Status RunInDeadBytes(dnn::Handle& handle, const DeadBytesSplit& split, dnn::ConvAlgo algo,
                            void* x_buffer, const void* x, const void* w, void* y,
                            const dnn::ConvEpilogue* epilogue, bool* applied) {
  const int64_t n = split.head.n + 1;
  char* yb = static_cast<char*>(y);
  char* y_last = yb + (n - 1) * split.y_image_bytes;
  const char* x_last = static_cast<const char*>(x) + (n - 1) * split.x_image_bytes;
  // The regions, checked again where the buffers really are.
  char* head_ws = AlignUp(y_last);
  char* last_ws = AlignUp(static_cast<char*>(x_buffer));
  if (head_ws + split.head_workspace > y_last + split.y_image_bytes ||
      last_ws + split.last_workspace >
          static_cast<char*>(x_buffer) + (n - 1) * split.x_image_bytes) {
    return absl::InternalError(
        "cuda Convolution: the dead-byte workspace does not fit where the buffers lie");
  }
  bool head_applied = false, last_applied = false;
  if (epilogue == nullptr) {
    KILN_RETURN_IF_ERROR(dnn::RunConvolution(handle, dnn::ConvDirection::kForward, split.head, algo,
                                             1.0f, 0.0f, const_cast<void*>(x), const_cast<void*>(w),
                                             y, head_ws, split.head_workspace));
    // From here on images 0 .. n-2 of x are dead: the last image's scratch goes there.
    KILN_RETURN_IF_ERROR(dnn::RunConvolution(
        handle, dnn::ConvDirection::kForward, split.last, algo, 1.0f, 0.0f,
        const_cast<char*>(x_last), const_cast<void*>(w), y_last, last_ws, split.last_workspace));
  } else {
    KILN_RETURN_IF_ERROR(dnn::RunConvolutionForwardWithEpilogue(
        handle, split.head, algo, 1.0f, 0.0f, x, w, y, head_ws, split.head_workspace, *epilogue,
        &head_applied));
    KILN_RETURN_IF_ERROR(dnn::RunConvolutionForwardWithEpilogue(
        handle, split.last, algo, 1.0f, 0.0f, x_last, w, y_last, last_ws, split.last_workspace,
        *epilogue, &last_applied));
    if (head_applied != last_applied) {
      return absl::InternalError(
          "cuda Convolution: the two parts of the batch took different paths for the epilogue");
    }
  }
  if (applied != nullptr) *applied = head_applied;
  return absl::OkStatus();
}

}  // namespace cuda_graph
}  // namespace kiln
