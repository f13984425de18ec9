#include "frontends/caffe/data/datum_batch_source.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/data/image_list.h"

namespace kiln {
namespace {

// SplitMix64's finalizer: turns (seed, stream) into well-separated seeds for the independent
// random streams of one source (skip, permutation per epoch, crop/mirror per shard).
uint64_t Mix(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::mt19937_64 Generator(uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  return std::mt19937_64(seq);
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

std::string Where(const std::string& name, const std::string& source) {
  return absl::StrCat("data layer '", name, "': source '", source, "'");
}

// Old files keep the transform inside data_param / image_data_param; Caffe's upgrade moves it,
// so honour it here too for a layer that was not upgraded.
template <typename Param>
void TakeDeprecatedTransform(const Param& old, caffe::TransformationParameter& t) {
  if (old.has_scale() && !t.has_scale()) t.set_scale(old.scale());
  if (old.has_mean_file() && !t.has_mean_file()) t.set_mean_file(old.mean_file());
  if (old.has_crop_size() && !t.has_crop_size()) t.set_crop_size(old.crop_size());
  if (old.has_mirror() && !t.has_mirror()) t.set_mirror(old.mirror());
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatumBatchSource>> DatumBatchSource::OpenDataLayer(
    const caffe::LayerParameter& layer, caffe::Phase phase, const std::string& base_dir,
    uint64_t seed, bool shuffle, int shard, int num_shards) {
  const std::string where = absl::StrCat("data layer '", layer.name(), "'");
  if (layer.type() == "ImageData") {
    return OpenImageDataLayer(layer, phase, base_dir, seed, shuffle, shard, num_shards);
  }
  if (layer.type() != "Data") {
    return absl::UnimplementedError(absl::StrCat(where, ": type '", layer.type(),
                                                 "' is not supported (only Data and ImageData)"));
  }
  const caffe::DataParameter& data = layer.data_param();
  if (data.source().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": data_param.source is missing"));
  }
  DatumBatchOptions options;
  options.name = layer.name();
  options.source = Resolve(data.source(), base_dir);
  options.backend = DbBackendFromCaffe(data.backend());
  options.batch_size = static_cast<int>(data.batch_size());
  options.rand_skip = static_cast<int>(data.rand_skip());
  options.prefetch = static_cast<int>(data.prefetch());
  options.transform = layer.transform_param();
  TakeDeprecatedTransform(data, options.transform);
  options.phase = phase;
  options.base_dir = base_dir;
  options.seed = seed;
  options.shuffle = shuffle;
  options.shard = shard;
  options.num_shards = num_shards;
  // Errors name the source as the prototxt gives it, not the resolved path.
  return OpenNamed(options, data.source(), nullptr);
}

absl::StatusOr<std::unique_ptr<DatumBatchSource>> DatumBatchSource::OpenImageDataLayer(
    const caffe::LayerParameter& layer, caffe::Phase phase, const std::string& base_dir,
    uint64_t seed, bool shuffle, int shard, int num_shards) {
  const caffe::ImageDataParameter& image = layer.image_data_param();
  if (image.source().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data layer '", layer.name(), "': image_data_param.source is missing"));
  }
  DatumBatchOptions options;
  options.name = layer.name();
  options.source = Resolve(image.source(), base_dir);
  options.batch_size = static_cast<int>(image.batch_size());
  options.rand_skip = static_cast<int>(image.rand_skip());
  options.transform = layer.transform_param();
  TakeDeprecatedTransform(image, options.transform);
  options.phase = phase;
  options.base_dir = base_dir;
  options.seed = seed;
  options.shuffle = shuffle || image.shuffle();
  options.shard = shard;
  options.num_shards = num_shards;

  const std::string where = Where(layer.name(), image.source());
  ImageListOptions list;
  // With no root_folder, relative image paths are resolved against base_dir: that is the
  // root_folder base_dir stands for ("" keeps them relative to the working directory, Caffe's
  // rule). Absolute paths are kept either way.
  list.root_folder = image.root_folder().empty() ? "" : Resolve(image.root_folder(), base_dir);
  list.is_color = image.is_color();
  list.new_height = static_cast<int>(image.new_height());
  list.new_width = static_cast<int>(image.new_width());
  absl::StatusOr<std::vector<ImageListEntry>> entries = ReadImageList(options.source);
  if (!entries.ok()) return Annotate(entries.status(), where);
  if (image.root_folder().empty() && !base_dir.empty()) {
    for (ImageListEntry& entry : *entries) entry.path = Resolve(entry.path, base_dir);
  }
  absl::StatusOr<std::unique_ptr<RecordReader>> records =
      MakeImageListReader(std::move(*entries), list);
  if (!records.ok()) return Annotate(records.status(), where);
  return OpenNamed(options, image.source(), std::move(*records));
}

absl::StatusOr<std::unique_ptr<DatumBatchSource>> DatumBatchSource::Open(
    const DatumBatchOptions& options) {
  return OpenNamed(options, options.source, nullptr);
}

absl::StatusOr<std::unique_ptr<DatumBatchSource>> DatumBatchSource::Open(
    const DatumBatchOptions& options, std::unique_ptr<RecordReader> records) {
  if (records == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(options.name, options.source), ": no records"));
  }
  return OpenNamed(options, options.source, std::move(records));
}

absl::StatusOr<std::unique_ptr<DatumBatchSource>> DatumBatchSource::OpenNamed(
    const DatumBatchOptions& options, const std::string& shown_source,
    std::unique_ptr<RecordReader> records) {
  std::unique_ptr<DatumBatchSource> source(new DatumBatchSource());
  source->where_ = Where(options.name, shown_source);
  KILN_RETURN_IF_ERROR(Annotate(source->Start(options, std::move(records)), source->where_));
  return source;
}

absl::Status DatumBatchSource::Start(const DatumBatchOptions& options,
                                     std::unique_ptr<RecordReader> records) {
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", options.batch_size, " must be positive"));
  }
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", options.shard, " of ", options.num_shards, " is out of range"));
  }
  if (options.rand_skip < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rand_skip ", options.rand_skip, " < 0"));
  }
  batch_size_ = options.batch_size;
  prefetch_ = std::max(1, options.prefetch);
  num_shards_ = options.num_shards;
  shuffle_ = options.shuffle;
  seed_ = options.seed;
  if (records != nullptr) {
    reader_ = std::move(records);
  } else {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<DatumReader> db,
                          DatumReader::Open(options.source, options.backend));
    KILN_ASSIGN_OR_RETURN(reader_, MakeDatumRecordReader(std::move(db), options.shuffle));
  }
  dataset_size_ = reader_->Count();
  KILN_ASSIGN_OR_RETURN(
      DatumTransformer transformer,
      DatumTransformer::Create(options.transform, options.phase, options.base_dir,
                               Mix(options.seed, 2 + static_cast<uint64_t>(options.shard))));
  transformer_ = std::make_unique<DatumTransformer>(std::move(transformer));

  // The data shape comes from the first record, as Caffe's data layers take it at setup.
  caffe::Datum first, decoded;
  std::string first_label;
  KILN_RETURN_IF_ERROR(reader_->Read(0, &first_label, &first));
  absl::StatusOr<const caffe::Datum*> raw = transformer_->DecodeIfEncoded(first, &decoded);
  if (!raw.ok()) return Annotate(raw.status(), first_label);
  absl::StatusOr<std::vector<int64_t>> dims = transformer_->OutputDims(**raw);
  if (!dims.ok()) return Annotate(dims.status(), first_label);
  data_dims_ = {batch_size_, (*dims)[0], (*dims)[1], (*dims)[2]};

  int64_t skip = 0;
  if (options.rand_skip > 0) {
    skip = static_cast<int64_t>(Generator(Mix(options.seed, 0))() %
                                static_cast<uint64_t>(options.rand_skip));
  }
  start_position_ = skip + options.shard;
  position_ = start_position_;
  transform_seed_ = Mix(options.seed, 2 + static_cast<uint64_t>(options.shard));
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

DatumBatchSource::~DatumBatchSource() { StopReading(); }

void DatumBatchSource::StopReading() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t DatumBatchSource::BatchesServed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return served_;
}

absl::Status DatumBatchSource::Seek(int64_t served) {
  const int64_t per_batch = static_cast<int64_t>(batch_size_) * num_shards_;
  if (served < 0 || served > (std::numeric_limits<int64_t>::max() - start_position_) / per_batch) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": cannot seek to batch ", served));
  }
  StopReading();
  // Only this thread runs now: the stream state is set without the lock's help, then the
  // read-ahead starts again from it.
  while (!ready_.empty()) {
    free_.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  error_ = absl::OkStatus();
  stop_ = false;
  position_ = start_position_ + served * per_batch;
  permutation_epoch_ = -1;
  served_ = served;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status DatumBatchSource::NextRecord(caffe::Datum* datum, std::string* label, int64_t* at) {
  *at = position_;
  int64_t index = position_ % dataset_size_;
  if (shuffle_) {
    const int64_t epoch = position_ / dataset_size_;
    if (epoch != permutation_epoch_) {
      // Fisher-Yates with the generator's output modulo i+1, so the order is the same with
      // every standard library (std::shuffle's algorithm is not specified).
      std::mt19937_64 rng = Generator(Mix(Mix(seed_, 1), static_cast<uint64_t>(epoch)));
      permutation_.resize(dataset_size_);
      for (int64_t i = 0; i < dataset_size_; ++i) permutation_[i] = i;
      for (int64_t i = dataset_size_ - 1; i > 0; --i) {
        std::swap(permutation_[i], permutation_[rng() % static_cast<uint64_t>(i + 1)]);
      }
      permutation_epoch_ = epoch;
    }
    index = permutation_[index];
  }
  KILN_RETURN_IF_ERROR(reader_->Read(index, label, datum));
  position_ += num_shards_;
  return absl::OkStatus();
}

absl::Status DatumBatchSource::Fill(Batch* batch) {
  const int64_t sample = data_dims_[1] * data_dims_[2] * data_dims_[3];
  batch->data_dims = data_dims_;
  batch->data.resize(sample * batch_size_);
  batch->labels.resize(batch_size_);
  caffe::Datum datum, decoded;
  std::string record;
  for (int i = 0; i < batch_size_; ++i) {
    int64_t at = 0;
    KILN_RETURN_IF_ERROR(NextRecord(&datum, &record, &at));
    // Decoded once here; the transformer then sees a raw record.
    absl::StatusOr<const caffe::Datum*> raw = transformer_->DecodeIfEncoded(datum, &decoded);
    if (!raw.ok()) return Annotate(raw.status(), record);
    absl::StatusOr<std::vector<int64_t>> dims = transformer_->OutputDims(**raw);
    if (!dims.ok()) return Annotate(dims.status(), record);
    if ((*dims)[0] != data_dims_[1] || (*dims)[1] != data_dims_[2] || (*dims)[2] != data_dims_[3]) {
      return absl::InvalidArgumentError(absl::StrCat(
          record, ": transforms to ", absl::StrJoin(*dims, "x"), " but the first record to ",
          data_dims_[1], "x", data_dims_[2], "x", data_dims_[3],
          " (a data layer's top has one size: resize or crop the images to one)"));
    }
    transformer_->Reseed(Mix(transform_seed_, static_cast<uint64_t>(at)));
    KILN_RETURN_IF_ERROR(
        Annotate(transformer_->Transform(**raw, &batch->data[i * sample]), record));
    batch->labels[i] = static_cast<float>((*raw)->label());
  }
  return absl::OkStatus();
}

void DatumBatchSource::Run() {
  while (true) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_cv_.wait(lock, [this] { return stop_ || static_cast<int>(ready_.size()) < prefetch_; });
      if (stop_) return;
      if (!free_.empty()) {
        batch = std::move(free_.back());
        free_.pop_back();
      }
    }
    absl::Status status = Fill(&batch);  // outside the lock: the consumer keeps taking batches
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status.ok()) {
        ready_.push_back(std::move(batch));
      } else {
        error_ = Annotate(status, where_);
      }
    }
    ready_cv_.notify_one();
    if (!status.ok()) return;
  }
}

absl::Status DatumBatchSource::Next(Batch* batch) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_cv_.wait(lock, [this] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  std::swap(*batch, ready_.front());
  free_.push_back(std::move(ready_.front()));
  ready_.pop_front();
  ++served_;
  lock.unlock();
  space_cv_.notify_one();
  return absl::OkStatus();
}

std::vector<std::vector<int64_t>> DatumBatchSource::BatchDims() const {
  return {data_dims_, {data_dims_.empty() ? 0 : data_dims_[0]}};
}

absl::Status DatumBatchSource::NextBatch(std::vector<std::vector<float>>& values) {
  values.resize(2);
  Batch batch;
  batch.data.swap(values[0]);  // recycled as buffers, as Next does with its own
  batch.labels.swap(values[1]);
  absl::Status status = Next(&batch);
  values[0].swap(batch.data);
  values[1].swap(batch.labels);
  return status;
}

}  // namespace kiln
