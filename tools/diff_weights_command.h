// `kiln diff-weights --weights A.caffemodel --against B.caffemodel [--tolerance T]`: compares
// two .caffemodel files blob by blob (layers matched by name) and prints, per blob and overall,
// the largest absolute and relative difference. With --tolerance it exits 1 unless every
// element satisfies |a - b| <= T * (1 + |b|) (an absolute and relative tolerance of T together),
// so scripts (the multi-GPU check: two GPUs of batch B against one of batch 2B) can test
// training runs for agreement without a protobuf parser of their own.
#ifndef KILN_TOOLS_DIFF_WEIGHTS_COMMAND_H_
#define KILN_TOOLS_DIFF_WEIGHTS_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// The comparison of two nets' blobs.
struct WeightsDiff {
  int blobs = 0;         // blobs compared
  int64_t elements = 0;  // elements compared
  double max_abs = 0;    // max |a - b|
  double max_rel = 0;    // max |a - b| / max(|a|, |b|) over elements where that is > 0
  double max_mixed = 0;  // max |a - b| / (1 + |b|): the quantity --tolerance bounds
  std::string worst;     // "layer/blob index" of max_mixed
  std::string report;    // one line per blob
};

// InvalidArgument when the nets differ in layers with blobs, blob counts or blob sizes (naming
// the layer).
absl::StatusOr<WeightsDiff> DiffWeights(const caffe::NetParameter& a, const caffe::NetParameter& b);

int DiffWeightsCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_DIFF_WEIGHTS_COMMAND_H_
