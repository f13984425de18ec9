// The validated, per-dimension parameters of a Convolution/Deconvolution node, shared by shape
// inference and every kernel so that attribute expansion lives in one place.
#ifndef KILN_OPS_CONVOLUTION_PARAMS_H_
#define KILN_OPS_CONVOLUTION_PARAMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"

namespace kiln {

struct ConvolutionParams {
  std::vector<int64_t> stride, pad, dilation;  // One per spatial dim.
  // Padding after each spatial dim: `pad` unless the node has a "pad_end" attribute (only
  // compiler passes set one: passes/split_rows_for_memory.cc computes a band of a convolution's
  // output with it). With pad_end either may be negative: the window then starts (or stops)
  // inside the input.
  std::vector<int64_t> pad_end;
  bool asymmetric = false;  // the node has pad_end
  int64_t group = 1;
  bool flip_filter = false;  // mode "convolution".

  // From a node's normalized attributes; InvalidArgument on bad values.
  static absl::StatusOr<ConvolutionParams> FromAttrs(const AttrMap& attrs, int num_spatial);
};

}  // namespace kiln

#endif  // KILN_OPS_CONVOLUTION_PARAMS_H_
