// A BatchNorm with stored statistics, and the Scale that usually follows it in Caffe files, as
// one per-channel affine map y = a[c] x + b[c]. Both BatchNorm passes start from this.
#ifndef KILN_PASSES_BATCHNORM_AFFINE_H_
#define KILN_PASSES_BATCHNORM_AFFINE_H_

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct ChannelAffine {
  std::vector<double> a, b;  // one per channel
  const Node* batchnorm = nullptr;
  const Node* scale = nullptr;  // the absorbed Scale, or null
  Value output;                 // the value the affine map replaces
};

// The affine map of `batchnorm` (plus its sole-consumer Scale when that Scale is a per-channel
// constant one), or an empty `reason` set to why not (training statistics, non-constant
// statistics, per-activation mode on a tensor with spatial dims, ...).
bool BatchNormAsAffine(const Graph& graph, const Node& batchnorm, ChannelAffine* affine,
                       std::string* reason);

}  // namespace kiln

#endif  // KILN_PASSES_BATCHNORM_AFFINE_H_
