// Reference Pooling: each output's window, clipped to the image for the values and to the padded
// extent for Caffe's average divisor.
#include <algorithm>
#include <cfloat>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "kernels/reference/spatial3.h"
#include "ops/pooling_params.h"

namespace kiln {

namespace {

absl::Status Pooling(const Node& node, const DenseArgs& a) {
  const TensorType& xt = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(PoolingParams p, PoolingParams::Create(node.attrs(), node.input(0).type()));
  const Dims3 in = SpatialOf(xt.dims()), out = SpatialOf(a.out_types[0].dims());
  const Dims3 k = Promote3(p.kernel, 1), s = Promote3(p.stride, 1), pad = Promote3(p.pad, 0);
  const int64_t planes = xt.dim(0) * xt.dim(1);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* x = a.in[0] + plane * Volume(in);
    float* y = a.out[0] + plane * Volume(out);
    for (int64_t od = 0; od < out[0]; ++od) {
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          int64_t lo[3], hi[3];
          int64_t padded_count = 1;
          for (int d = 0; d < 3; ++d) {
            const int64_t start = o[d] * s[d] - pad[d];
            const int64_t end = std::min(start + k[d], in[d] + pad[d]);
            padded_count *= end - start;
            lo[d] = std::max<int64_t>(start, 0);
            hi[d] = std::min(end, in[d]);
          }
          double sum = 0.0;
          float max = -FLT_MAX;
          int64_t count = 0;
          for (int64_t id = lo[0]; id < hi[0]; ++id) {
            for (int64_t ih = lo[1]; ih < hi[1]; ++ih) {
              for (int64_t iw = lo[2]; iw < hi[2]; ++iw) {
                const float v = x[(id * in[1] + ih) * in[2] + iw];
                max = std::max(max, v);
                sum += v;
                ++count;
              }
            }
          }
          float result = max;  // kMax; the switch covers every mode
          switch (p.mode) {
            case PoolingMode::kMax:
              result = max;
              break;
            case PoolingMode::kAverageIncludePad:
              result = static_cast<float>(sum / static_cast<double>(padded_count));
              break;
            case PoolingMode::kAverageExcludePad:
              result = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
              break;
          }
          y[(od * out[1] + oh) * out[2] + ow] = result;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferencePooling(KernelRegistry& registry) {
  return RegisterReference(registry, "Pooling", Pooling, "direct");
}

}  // namespace kiln
