// Where a trainer's batches come from. A source feeds a fixed list of graph inputs (f32, fixed
// shapes) and produces one batch per forward pass; the trainer copies it into the plan's input
// buffers. Implementations: MemoryBatchSource (arrays the caller holds, training/
// memory_batch_source.h) and the Caffe frontend's data layers (frontends/caffe/data).
#ifndef KILN_TRAINING_BATCH_SOURCE_H_
#define KILN_TRAINING_BATCH_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace kiln {

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // The shape of each value a batch holds, in the order Next fills them (for a labelled image
  // source: the images (N, C, H, W), then the labels (N)).
  virtual std::vector<std::vector<int64_t>> BatchDims() const = 0;

  // Fills `values` with the next batch: one vector per BatchDims entry, of exactly that many
  // elements. The vectors passed in may be reused as buffers.
  virtual absl::Status NextBatch(std::vector<std::vector<float>>& values) = 0;
};

}  // namespace kiln

#endif  // KILN_TRAINING_BATCH_SOURCE_H_
