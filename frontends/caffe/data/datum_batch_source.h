// The object a Trainer pulls training batches from: one Caffe data layer's records (a Data
// layer's database, an ImageData layer's image files), read in a background thread, transformed,
// and batched ahead of need.
#ifndef KILN_FRONTENDS_CAFFE_DATA_DATUM_BATCH_SOURCE_H_
#define KILN_FRONTENDS_CAFFE_DATA_DATUM_BATCH_SOURCE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"
#include "frontends/caffe/data/datum_db.h"
#include "frontends/caffe/data/record_reader.h"
#include "frontends/caffe/data/transform.h"
#include "training/batch_source.h"

namespace kiln {

// One batch: `data` holds data_dims = (N, C, H, W) floats in NCHW order, `labels` N labels (the
// Datum labels as floats, as Caffe's label top holds them).
struct Batch {
  std::vector<int64_t> data_dims;
  std::vector<float> data;
  std::vector<float> labels;
};

// Everything a DatumBatchSource needs, for callers that do not start from a prototxt layer (tests,
// tools). OpenDataLayer fills it from a LayerParameter.
struct DatumBatchOptions {
  std::string name;    // the layer's name, for errors
  std::string source;  // the database path (already resolved)
  DbBackend backend = DbBackend::kLevelDb;
  int batch_size = 0;
  // Caffe's rand_skip: the stream starts at a random record in [0, rand_skip), drawn from the
  // seed, so that several runs over the same data do not see it in lockstep.
  int rand_skip = 0;
  caffe::TransformationParameter transform;
  caffe::Phase phase = caffe::TRAIN;
  std::string base_dir;  // relative mean_file paths are resolved against it
  // Seeds everything random: rand_skip, crop/mirror and the shuffle. Every shard of one run must
  // get the same seed (the shards then share the skip and the permutation, which keeps them
  // disjoint); each shard's crop/mirror stream is derived from the seed and its shard index.
  uint64_t seed = 1;
  // Visit the records in a new seeded permutation every epoch instead of in order: Caffe's
  // image_data_param.shuffle for ImageData; a Kiln extension for Data, whose layer in Caffe
  // always reads in key order. The permutation of epoch 0 is drawn before rand_skip applies, so
  // the skip lands inside the shuffled order, as in Caffe's ImageData layer.
  bool shuffle = false;
  // Stride sharding for data-parallel training: shard k of n takes stream positions k, k+n, ...,
  // so in each pass over the data every record goes to exactly one shard.
  int shard = 0;
  int num_shards = 1;
  // Batches kept ready by the background thread (DataParameter.prefetch, Caffe's default 4).
  int prefetch = 4;
};

// Reads a data layer's records in a background thread that keeps `prefetch` transformed batches
// ready, so the Trainer rarely waits on disk, the image decoder or the transformer. Records cycle
// forever: after the last one the stream wraps to the first, as Caffe's does. Encoded records
// (JPEG/PNG in a Datum) are decoded on the same thread.
//
// Thread model: Next, data_dims and dataset_size are for one consumer thread; the prefetch thread
// is internal and stops (and is joined) in the destructor, even while blocked on a full queue.
class DatumBatchSource : public BatchSource {
 public:
  // From one Caffe data layer in `phase`:
  //   * type "Data": data_param.source, backend, batch_size, rand_skip, prefetch;
  //   * type "ImageData": image_data_param.source (the image list), root_folder, batch_size,
  //     rand_skip, shuffle, new_height, new_width, is_color (data/image_list.h); every image must
  //     come out of the transform with the same size, since the data top has one shape;
  // plus transform_param, and the deprecated transform fields of data_param/image_data_param
  // when transform_param does not set them. Relative sources, root folders and mean files are
  // resolved against `base_dir` (and, for ImageData without a root_folder, relative image
  // paths). `seed`, `shard` and `num_shards` as in DatumBatchOptions; `shuffle` is ORed with
  // image_data_param.shuffle. Errors name the layer and the source: "data layer 'mnist': source
  // 'x_lmdb': ...". Other data-layer types are Unimplemented.
  static absl::StatusOr<std::unique_ptr<DatumBatchSource>> OpenDataLayer(
      const caffe::LayerParameter& layer, caffe::Phase phase, const std::string& base_dir,
      uint64_t seed, bool shuffle = false, int shard = 0, int num_shards = 1);

  // From explicit options. Opens the database, reads its first record to learn the data shape
  // (and to check it against crop_size and the mean), then starts the prefetch thread.
  static absl::StatusOr<std::unique_ptr<DatumBatchSource>> Open(const DatumBatchOptions& options);

  // The same over any records: `options.source` and `backend` then only name the source in
  // errors.
  static absl::StatusOr<std::unique_ptr<DatumBatchSource>> Open(
      const DatumBatchOptions& options, std::unique_ptr<RecordReader> records);

  ~DatumBatchSource();
  DatumBatchSource(const DatumBatchSource&) = delete;
  DatumBatchSource& operator=(const DatumBatchSource&) = delete;

  // Shape of the data top, (N, C, H, W), known before the first batch as Caffe's Data layer
  // knows it at setup.
  const std::vector<int64_t>& data_dims() const { return data_dims_; }

  // Moves the next batch into `batch`, blocking until the prefetch thread has one. The vectors
  // `batch` held are recycled as buffers for later batches. An error of the prefetch thread (a
  // corrupt record, a record of another shape) comes out here, after the batches that were ready
  // before it, and again on every later call.
  absl::Status Next(Batch* batch);

  // The training engine's view (training/batch_source.h): the data, then the labels.
  std::vector<std::vector<int64_t>> BatchDims() const override;
  absl::Status NextBatch(std::vector<std::vector<float>>& values) override;
  int64_t BatchesServed() const override;
  // Stops the read-ahead, drops the batches read ahead (and an error met there), and starts
  // again at the record the stream would have reached after `served` batches.
  absl::Status Seek(int64_t served) override;

  // Records in the source (all shards together).
  int64_t dataset_size() const { return dataset_size_; }

 private:
  DatumBatchSource() = default;
  // Open, with errors naming `shown_source` (the path as the prototxt wrote it). `records` null:
  // open options.source as a database.
  static absl::StatusOr<std::unique_ptr<DatumBatchSource>> OpenNamed(
      const DatumBatchOptions& options, const std::string& shown_source,
      std::unique_ptr<RecordReader> records);
  static absl::StatusOr<std::unique_ptr<DatumBatchSource>> OpenImageDataLayer(
      const caffe::LayerParameter& layer, caffe::Phase phase, const std::string& base_dir,
      uint64_t seed, bool shuffle, int shard, int num_shards);
  absl::Status Start(const DatumBatchOptions& options, std::unique_ptr<RecordReader> records);
  void Run();
  absl::Status Fill(Batch* batch);
  // Reads the record at position_ into `datum` and advances; `at` is the position it had.
  absl::Status NextRecord(caffe::Datum* datum, std::string* label, int64_t* at);
  void StopReading();

  std::string where_;  // "data layer 'x': source 'y'"
  std::unique_ptr<RecordReader> reader_;
  std::unique_ptr<DatumTransformer> transformer_;
  std::vector<int64_t> data_dims_;
  int64_t dataset_size_ = 0;
  int batch_size_ = 0;
  int prefetch_ = 4;

  // The record stream: positions start at the skip plus the shard and advance by num_shards.
  int64_t start_position_ = 0;
  int64_t position_ = 0;
  int64_t served_ = 0;  // batches the consumer took (under mu_)
  int num_shards_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  uint64_t transform_seed_ = 0;       // each record's transform is seeded from it and the position
  std::vector<int64_t> permutation_;  // shuffle only: this epoch's order
  int64_t permutation_epoch_ = -1;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;  // a batch or an error arrived
  std::condition_variable space_cv_;  // the consumer took a batch, or stop
  std::deque<Batch> ready_;
  std::vector<Batch> free_;
  absl::Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_DATUM_BATCH_SOURCE_H_
