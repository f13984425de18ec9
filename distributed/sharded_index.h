// ShardedIndex: which records of a dataset each rank of a data-parallel job reads, and in what
// order, as plain arithmetic (no files).
//
// Kiln follows Caffe 1.0's multi-GPU Data layer: every solver reads the database as one endless
// stream (wrapping after the last record) with its own cursor, and keeps the record at stream
// position p only when p mod world_size == its rank. Here the stream is global: position p holds
// the record that epoch (p / D)'s order puts at p mod D (D records; the order is the key order,
// or, with shuffle, a seeded permutation per epoch that every rank computes identically), and
// rank r's k-th record is the one at position start + k * W + r.
//
// Consequences, which the tests check:
//   - Within an epoch (the D positions [e*D, (e+1)*D)) every record goes to exactly one rank:
//     no record is seen twice across ranks and together they cover the dataset.
//   - The remainder (D mod W != 0) is neither dropped nor padded: some ranks read one record
//     more of epoch e than others, and the next epoch starts for them one record earlier. The
//     ranks stay in lockstep (every step takes `batch` records from each), which synchronous
//     SGD needs; an epoch boundary can fall inside a batch, as in Caffe.
//   - Step s of W ranks with batch B reads exactly the records that step s of one rank with
//     batch W*B reads (positions [s*W*B, (s+1)*W*B)), only split among the ranks: the reason
//     data-parallel training matches single-GPU training with the larger batch.
//
// frontends/caffe/data/datum_batch_source.cc implements the same stream (its shard/num_shards
// options, with the same seeded permutation and rand_skip start);
// tests/distributed/sharded_index_test.cc checks that the two agree record for record.
#ifndef KILN_DISTRIBUTED_SHARDED_INDEX_H_
#define KILN_DISTRIBUTED_SHARDED_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

struct ShardingOptions {
  int64_t dataset_size = 0;  // D, at least 1
  int world_size = 1;        // W
  int rank = 0;              // r in [0, W)
  // A new permutation every epoch (Kiln's extension; Caffe reads in key order), drawn from
  // `seed` and the epoch, the same on every rank.
  bool shuffle = false;
  uint64_t seed = 1;
  // The stream position where rank 0 starts (Caffe's rand_skip draws it); the same on every
  // rank. At least 0.
  int64_t start = 0;
};

// The start position frontends/caffe/data/datum_batch_source.cc draws for a Data layer's rand_skip
// (0 when rand_skip is 0): uniform in [0, rand_skip) from `seed`, the same on every rank.
int64_t RandSkipStart(uint64_t seed, int rand_skip);

class ShardedIndex {
 public:
  // InvalidArgument for D < 1, W < 1, a rank outside [0, W) or a negative start.
  static absl::StatusOr<ShardedIndex> Create(const ShardingOptions& options);

  const ShardingOptions& options() const { return options_; }

  // The stream position of this rank's k-th record (k >= 0).
  int64_t Position(int64_t k) const;
  // The record (0..D-1) at stream position p (p >= 0).
  int64_t RecordAtPosition(int64_t p) const;
  // This rank's records k = first .. first+count-1, in the order it reads them; its batch s of
  // size B is Records(s * B, B). InvalidArgument for a negative first or count.
  absl::StatusOr<std::vector<int64_t>> Records(int64_t first, int64_t count) const;
  // The records of epoch `epoch` (stream positions [epoch*D, (epoch+1)*D), those before `start`
  // excluded) that this rank reads, in its order. InvalidArgument for a negative epoch.
  absl::StatusOr<std::vector<int64_t>> EpochRecords(int64_t epoch) const;
  // The order of epoch `epoch`: position i of the epoch holds record Permutation(epoch)[i]
  // (the identity without shuffle).
  std::vector<int64_t> Permutation(int64_t epoch) const;

 private:
  explicit ShardedIndex(const ShardingOptions& options) : options_(options) {}
  ShardingOptions options_;
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_SHARDED_INDEX_H_
