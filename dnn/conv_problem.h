// A convolution checked against its descriptors and flattened to plain numbers: every problem is
// treated as 3-d (a 2-d one has depth 1 everywhere), so kernels and the reference need only one
// code path. Shared by the CUDA algorithms, the CPU reference and the algorithm cache key.
#ifndef KILN_DNN_CONV_PROBLEM_H_
#define KILN_DNN_CONV_PROBLEM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/host_device.h"

namespace kiln {
namespace dnn {

struct ConvProblem {
  DataType dtype = DataType::kF32;
  MathMode math = MathMode::kFp32;
  ConvolutionMode mode = ConvolutionMode::kCrossCorrelation;
  int spatial_rank = 2;
  int64_t n = 0, c = 0, k = 0, groups = 1;  // c and k count all groups' channels
  int64_t in[3] = {1, 1, 1};                // D, H, W
  int64_t out[3] = {1, 1, 1};               // O, P, Q
  int64_t filter[3] = {1, 1, 1};            // T, R, S
  int64_t pad[3] = {0, 0, 0};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t x_stride[5] = {};  // n, c, d, h, w (elements)
  int64_t y_stride[5] = {};  // n, k, o, p, q
  int64_t w_stride[5] = {};  // k, c, t, r, s
  TensorFormat filter_format = TensorFormat::kNCHW;
  int64_t x_span = 0, y_span = 0, w_count = 0;  // elements each buffer must hold

  KILN_HD int64_t cg() const { return c / groups; }
  KILN_HD int64_t kg() const { return k / groups; }
  KILN_HD int64_t OutputPixels() const { return n * out[0] * out[1] * out[2]; }
  KILN_HD int64_t FilterTaps() const { return filter[0] * filter[1] * filter[2]; }
  // Multiply-adds x2 of one direction (all three directions do the same count).
  double Flops() const;
  // True when x's channels are contiguous (stride 1), as in NHWC.
  bool XChannelsLast() const { return x_stride[1] == 1; }
  // True when `out` is what the padding `pad` on both sides gives (cuDNN's only case). False for
  // a descriptor with its own end pads: `pad` is then the padding before each dim, and the
  // output rows past `out` are simply not computed.
  bool PaddingIsSymmetric() const;
  bool YChannelsLast() const { return y_stride[1] == 1; }
  // A stable, human-readable key of everything that decides speed (for the algorithm cache).
  std::string Key() const;
};

// Checks that x, w, conv and y describe one convolution (y's dims must equal the computed output
// dims) and flattens it. `where` prefixes every error ("ConvolutionForward", ...).
absl::StatusOr<ConvProblem> MakeConvProblem(const TensorDescriptor& x, const FilterDescriptor& w,
                                            const ConvolutionDescriptor& conv,
                                            const TensorDescriptor& y, const char* where);

// One group of a grouped problem as an ungrouped one (c = cg, k = kg, the same strides), and
// where group g's x, y and w start (elements from the whole tensors' starts). Lets an algorithm
// that serves only ungrouped problems run a grouped one group by group.
ConvProblem OneGroupOf(const ConvProblem& p);
struct GroupOffsets {
  int64_t x = 0, y = 0, w = 0;
};
GroupOffsets GroupOffsetsOf(const ConvProblem& p, int64_t g);

// Checks a bias-gradient tensor (1, K, 1, 1[, 1]) against dy's channel count.
absl::Status CheckBiasDescriptor(const TensorDescriptor& db, const TensorDescriptor& dy,
                                 const char* where);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CONV_PROBLEM_H_
