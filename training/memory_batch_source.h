// Batches from arrays the caller holds: N examples of any shape and, optionally, N labels,
// served in order or in a seeded shuffle that is drawn again each epoch. What a builder-made
// graph trains from, and what Caffe's MemoryData layer maps to.
#ifndef KILN_TRAINING_MEMORY_BATCH_SOURCE_H_
#define KILN_TRAINING_MEMORY_BATCH_SOURCE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "training/batch_source.h"

namespace kiln {

struct MemoryBatchOptions {
  int64_t batch_size = 64;
  bool shuffle = false;  // a new permutation every epoch, from `seed`
  uint64_t seed = 1;
};

class MemoryBatchSource : public BatchSource {
 public:
  // `examples` holds N examples of shape `example_dims` back to back; `labels` is empty or
  // holds N labels. InvalidArgument when the sizes disagree or a batch is larger than N.
  static absl::StatusOr<std::unique_ptr<MemoryBatchSource>> Create(
      std::vector<float> examples, std::vector<int64_t> example_dims, std::vector<float> labels,
      const MemoryBatchOptions& options);

  std::vector<std::vector<int64_t>> BatchDims() const override;
  absl::Status NextBatch(std::vector<std::vector<float>>& values) override;
  int64_t BatchesServed() const override { return served_; }
  // Draws the epochs' permutations again from the seed up to the one `served` falls in.
  absl::Status Seek(int64_t served) override;

  int64_t size() const { return count_; }
  int64_t epoch() const { return epoch_; }

 private:
  MemoryBatchSource() = default;
  void Reorder();

  std::vector<float> examples_, labels_;
  std::vector<int64_t> example_dims_;
  int64_t example_size_ = 0, count_ = 0;
  MemoryBatchOptions options_;
  std::vector<int64_t> order_;
  int64_t cursor_ = 0, epoch_ = 0;
  int64_t served_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kiln

#endif  // KILN_TRAINING_MEMORY_BATCH_SOURCE_H_
