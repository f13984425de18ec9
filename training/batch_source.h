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

  // Where the source stands: the batches it has handed out since it opened, counting those a
  // Seek passed over. A snapshot records it so that a resumed run continues the data where the
  // interrupted one stood. Negative for a source that does not keep count (the default); such
  // a source cannot be resumed exactly, and the trainer says so.
  virtual int64_t BatchesServed() const { return -1; }

  // Puts the source where it stood after `served` batches from its start: the next batch is the
  // one it would then have handed out, with the same order and the same random transforms.
  // Unimplemented for a source that cannot (the default).
  virtual absl::Status Seek(int64_t served) {
    (void)served;
    return absl::UnimplementedError("this batch source cannot be repositioned");
  }
};

}  // namespace kiln

#endif  // KILN_TRAINING_BATCH_SOURCE_H_
