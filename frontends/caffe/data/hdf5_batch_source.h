// The batches of Caffe's HDF5Data layer: a list file names HDF5 files; each file holds one
// dataset per top of the layer, all with the same number of rows (dim 0); a batch is
// `batch_size` consecutive rows of every dataset. Rows run through the files in list order and
// wrap to the first file after the last, as Caffe's layer does; with `shuffle` the file order and
// the rows within each file are permuted anew every pass (seeded, so a run repeats exactly).
//
// Recurrent nets use the layout of Caffe's LRCN examples: rows are time steps and dim 1 the
// parallel streams, so a batch is T steps of N streams and the next batch continues them. That is
// why sharding for data-parallel training strides over whole batches (shard k of n takes batches
// k, k+n, ...) rather than over rows, which would tear a batch's steps apart.
//
// Files are read whole, one at a time, on the caller's thread: the HDF5 library's serial build is
// not thread-safe, and a file's rows are served from memory until it is used up.
#ifndef KILN_FRONTENDS_CAFFE_DATA_HDF5_BATCH_SOURCE_H_
#define KILN_FRONTENDS_CAFFE_DATA_HDF5_BATCH_SOURCE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"
#include "training/batch_source.h"

namespace kiln {

struct Hdf5BatchOptions {
  std::string name;               // the layer's name, for errors
  std::string source;             // the list file's path (already resolved)
  std::vector<std::string> tops;  // the dataset of each top, by name
  int64_t batch_size = 0;
  bool shuffle = false;
  uint64_t seed = 1;  // the shuffle's seed; every shard of a run gets the same
  int shard = 0;
  int num_shards = 1;
};

class Hdf5BatchSource : public BatchSource {
 public:
  // From an HDF5Data layer: hdf5_data_param.source, batch_size, shuffle, the layer's tops.
  // Relative file names in the list are taken from the working directory first, then from the
  // list's folder. Every file is opened once here to check that it has every dataset, with one
  // row count per file and the same row shape in all files; errors name the layer, the file and
  // the dataset.
  static absl::StatusOr<std::unique_ptr<Hdf5BatchSource>> OpenDataLayer(
      const caffe::LayerParameter& layer, const std::string& resolved_source, uint64_t seed,
      int shard = 0, int num_shards = 1);
  static absl::StatusOr<std::unique_ptr<Hdf5BatchSource>> Open(const Hdf5BatchOptions& options);

  // (batch_size, row dims...) for each top, in the layer's top order.
  std::vector<std::vector<int64_t>> BatchDims() const override;
  absl::Status NextBatch(std::vector<std::vector<float>>& values) override;
  int64_t BatchesServed() const override { return served_; }
  absl::Status Seek(int64_t served) override;

  // Rows in all files together.
  int64_t total_rows() const { return total_rows_; }

 private:
  Hdf5BatchSource() = default;
  // Back to the first row of the first pass (the same permutations as at open).
  void Rewind();
  // Makes the next file of the pass current (a new pass, reshuffled, after the last).
  absl::Status LoadNextFile();
  // Moves past one batch, copying it into `values` unless null.
  absl::Status Advance(std::vector<std::vector<float>>* values);

  Hdf5BatchOptions options_;
  std::string where_;  // "data layer 'x': source 'y'"
  std::vector<std::string> files_;
  std::vector<int64_t> row_sizes_;  // elements in one row of each top
  std::vector<std::vector<int64_t>> row_dims_;
  int64_t total_rows_ = 0;

  std::mt19937_64 rng_;
  std::vector<size_t> file_order_;
  size_t next_file_ = 0;                    // index into file_order_
  std::vector<std::vector<float>> loaded_;  // the current file, one array per top
  std::vector<int64_t> row_order_;          // the current file's rows, in serving order
  int64_t next_row_ = 0;                    // index into row_order_
  int64_t served_ = 0;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_HDF5_BATCH_SOURCE_H_
