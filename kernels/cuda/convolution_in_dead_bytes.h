// A forward convolution whose workspace lives in bytes that are dead while it runs, so that it
// adds nothing to the plan's peak (KernelOptions::input_dies_here).
//
// At a plan's peak a convolution's input and output are both live and its workspace comes on
// top of them: FCN-8s's conv1_2 (64 -> 64 channels over four 698x698 planes, fp32) holds
// conv1_1's 476 MiB output, its own 476 MiB output and 108 MiB of Winograd tiles. But two
// regions are free for the taking when the input dies at this step and the output is written
// only by it:
//   - the output's last image, until the convolution writes it;
//   - the input's other images, once the convolution has read them.
// So the batch runs in two parts with the same algorithm: images 0 .. n-2 with their scratch in
// the output's image n-1, then image n-1 with its scratch in the input's images 0 .. n-2. Each
// part is the whole convolution of fewer images, so nothing but the part's launches changes.
//
// Only for packed inputs and outputs whose images are their outermost dimension (each image's
// bytes one run), beta == 0 (the output's old bytes are not read) and n >= 2.
#ifndef KILN_KERNELS_CUDA_CONVOLUTION_IN_DEAD_BYTES_H_
#define KILN_KERNELS_CUDA_CONVOLUTION_IN_DEAD_BYTES_H_

#include <optional>

#include "absl/status/status.h"
#include "dnn/conv_problem.h"
#include "dnn/cuda/conv/convolution.h"
#include "ir/tensor_type.h"

namespace kiln {
namespace cuda_graph {

struct DeadBytesSplit {
  dnn::ConvProblem head;  // images 0 .. n-2
  dnn::ConvProblem last;  // image n-1
  int64_t x_image_bytes = 0, y_image_bytes = 0;
  size_t head_workspace = 0, last_workspace = 0;  // each within the region it takes
};

// The split of `p` (x's whole buffer has type `x_buffer`, y's `y`) for `algo`, or nullopt when
// `p` does not qualify or a part's workspace does not fit in its region.
std::optional<DeadBytesSplit> SplitForDeadBytes(const dnn::Handle& probe, const dnn::ConvProblem& p,
                                                dnn::ConvAlgo algo, const TensorType& x_buffer,
                                                const TensorType& y);

// Runs both parts: x_buffer is the input's whole buffer, x where the problem's x starts in it
// (a band's window), y the output. `epilogue` as RunConvolutionForwardWithEpilogue (null: the
// plain convolution); *applied says whether both parts applied it in their kernels.
absl::Status RunInDeadBytes(dnn::Handle& handle, const DeadBytesSplit& split, dnn::ConvAlgo algo,
                            void* x_buffer, const void* x, const void* w, void* y,
                            const dnn::ConvEpilogue* epilogue, bool* applied);

}  // namespace cuda_graph
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CONVOLUTION_IN_DEAD_BYTES_H_
