#include "data/batch_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<BatchSource>> BatchSource::OpenDataLayer(
    const caffe::LayerParameter& layer, caffe::Phase phase, const std::string& base_dir,
    uint64_t seed, bool shuffle, int shard, int num_shards) {
  const std::string where = absl::StrCat("data layer '", layer.name(), "'");
  if (layer.type() != "Data") {
    return absl::UnimplementedError(
        absl::StrCat(where, ": type '", layer.type(), "' is not supported (only \"Data\")"));
  }
  const caffe::DataParameter& data = layer.data_param();
  if (data.source().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": data_param.source is missing"));
  }
  BatchSourceOptions options;
  options.name = layer.name();
  options.source = Resolve(data.source(), base_dir);
  options.backend = DbBackendFromCaffe(data.backend());
  options.batch_size = static_cast<int>(data.batch_size());
  options.rand_skip = static_cast<int>(data.rand_skip());
  options.prefetch = static_cast<int>(data.prefetch());
  options.transform = layer.transform_param();
  // Old files keep the transform inside data_param; Caffe's upgrade moves it, so honour it here
  // too for a layer that was not upgraded.
  caffe::TransformationParameter& t = options.transform;
  if (data.has_scale() && !t.has_scale()) t.set_scale(data.scale());
  if (data.has_mean_file() && !t.has_mean_file()) t.set_mean_file(data.mean_file());
  if (data.has_crop_size() && !t.has_crop_size()) t.set_crop_size(data.crop_size());
  if (data.has_mirror() && !t.has_mirror()) t.set_mirror(data.mirror());
  options.phase = phase;
  options.base_dir = base_dir;
  options.seed = seed;
  options.shuffle = shuffle;
  options.shard = shard;
  options.num_shards = num_shards;
  // Errors name the source as the prototxt gives it, not the resolved path.
  return OpenNamed(options, data.source());
}

absl::StatusOr<std::unique_ptr<BatchSource>> BatchSource::Open(const BatchSourceOptions& options) {
  return OpenNamed(options, options.source);
}

absl::StatusOr<std::unique_ptr<BatchSource>> BatchSource::OpenNamed(
    const BatchSourceOptions& options, const std::string& shown_source) {
  std::unique_ptr<BatchSource> source(new BatchSource());
  source->where_ = Where(options.name, shown_source);
  KILN_RETURN_IF_ERROR(Annotate(source->Start(options), source->where_));
  return source;
}

absl::Status BatchSource::Start(const BatchSourceOptions& options) {
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
  KILN_ASSIGN_OR_RETURN(reader_, DatumReader::Open(options.source, options.backend));
  dataset_size_ = reader_->Count();
  KILN_ASSIGN_OR_RETURN(
      DatumTransformer transformer,
      DatumTransformer::Create(options.transform, options.phase, options.base_dir,
                               Mix(options.seed, 2 + static_cast<uint64_t>(options.shard))));
  transformer_ = std::make_unique<DatumTransformer>(std::move(transformer));

  // The data shape comes from the first record, as Caffe's Data layer takes it at setup.
  caffe::Datum first;
  std::string first_key;
  KILN_RETURN_IF_ERROR(reader_->Read(&first_key, &first));
  KILN_RETURN_IF_ERROR(reader_->Rewind());
  absl::StatusOr<std::vector<int64_t>> dims = transformer_->OutputDims(first);
  if (!dims.ok()) return Annotate(dims.status(), absl::StrCat("record '", first_key, "'"));
  data_dims_ = {batch_size_, (*dims)[0], (*dims)[1], (*dims)[2]};

  int64_t skip = 0;
  if (options.rand_skip > 0) {
    skip = static_cast<int64_t>(Generator(Mix(options.seed, 0))() %
                                static_cast<uint64_t>(options.rand_skip));
  }
  position_ = skip + options.shard;
  if (shuffle_) {
    KILN_ASSIGN_OR_RETURN(keys_, reader_->Keys());
  } else {
    KILN_RETURN_IF_ERROR(reader_->Skip(position_ % dataset_size_));
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

BatchSource::~BatchSource() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status BatchSource::NextRecord(caffe::Datum* datum, std::string* key) {
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
    *key = keys_[permutation_[position_ % dataset_size_]];
    KILN_RETURN_IF_ERROR(reader_->Get(*key, datum));
  } else {
    KILN_RETURN_IF_ERROR(reader_->Read(key, datum));
    if (num_shards_ > 1) KILN_RETURN_IF_ERROR(reader_->Skip(num_shards_ - 1));
  }
  position_ += num_shards_;
  return absl::OkStatus();
}

absl::Status BatchSource::Fill(Batch* batch) {
  const int64_t sample = data_dims_[1] * data_dims_[2] * data_dims_[3];
  batch->data_dims = data_dims_;
  batch->data.resize(sample * batch_size_);
  batch->labels.resize(batch_size_);
  caffe::Datum datum;
  std::string key;
  for (int i = 0; i < batch_size_; ++i) {
    KILN_RETURN_IF_ERROR(NextRecord(&datum, &key));
    const std::string record = absl::StrCat("record '", key, "'");
    absl::StatusOr<std::vector<int64_t>> dims = transformer_->OutputDims(datum);
    if (!dims.ok()) return Annotate(dims.status(), record);
    if ((*dims)[0] != data_dims_[1] || (*dims)[1] != data_dims_[2] || (*dims)[2] != data_dims_[3]) {
      return absl::InvalidArgumentError(absl::StrCat(
          record, ": transforms to ", absl::StrJoin(*dims, "x"), " but the first record to ",
          data_dims_[1], "x", data_dims_[2], "x", data_dims_[3], " (Data layers need one size)"));
    }
    KILN_RETURN_IF_ERROR(
        Annotate(transformer_->Transform(datum, &batch->data[i * sample]), record));
    batch->labels[i] = static_cast<float>(datum.label());
  }
  return absl::OkStatus();
}

void BatchSource::Run() {
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

absl::Status BatchSource::Next(Batch* batch) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_cv_.wait(lock, [this] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  std::swap(*batch, ready_.front());
  free_.push_back(std::move(ready_.front()));
  ready_.pop_front();
  lock.unlock();
  space_cv_.notify_one();
  return absl::OkStatus();
}

}  // namespace kiln
