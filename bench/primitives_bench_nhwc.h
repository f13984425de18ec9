// The channels-last rows of bench/primitives_bench: LRN across channels and 3x3 stride-2
// pooling on the shapes of CaffeNet (norm1, norm2, pool1/2/5) and ResNet-18 (pool1) in f16, with
// bf16 and f32 on one shape each, next to cuDNN on the same NHWC buffers. These are the layers the
// graph runs channels-last in fp16 training.
#ifndef KILN_BENCH_PRIMITIVES_BENCH_NHWC_H_
#define KILN_BENCH_PRIMITIVES_BENCH_NHWC_H_

#include <functional>
#include <string>

#include "bench/cudnn_loader.h"
#include "dnn/cuda/dnn_handle.h"

namespace kiln {
namespace bench {

// Times one row: the op's name, the bytes it must move, Kiln's call and cuDNN's (null when cuDNN
// has no counterpart); each returns false on failure.
using AddRow =
    std::function<void(const std::string& op, double bytes, const std::function<bool()>& kiln,
                       const std::function<bool()>& cudnn)>;

// Adds the channels-last rows through `add`. `ch` is null when cuDNN is not loaded.
void AddChannelsLastRows(dnn::Handle& handle, const Cudnn& cudnn, cudnnHandle ch,
                         const AddRow& add);

}  // namespace bench
}  // namespace kiln

#endif  // KILN_BENCH_PRIMITIVES_BENCH_NHWC_H_
