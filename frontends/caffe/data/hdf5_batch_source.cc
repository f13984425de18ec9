#include "frontends/caffe/data/hdf5_batch_source.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <new>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

// Caffe's own limit on a blob (its counts are int); a file declaring more is refused before a
// byte is allocated, as HDF5 lets a file declare any extent without storing it.
constexpr int64_t kMaxElements = int64_t{1} << 31;

// Closes an HDF5 handle when it goes out of scope.
class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The library prints its error stack to stderr by default; Kiln reports through statuses.
void SilenceHdf5() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

struct Dataset {
  std::vector<int64_t> dims;
  std::vector<float> data;  // empty when only the dims were asked for
};

// Reads dataset `name` of `path` (its dims, and its values as f32 when `values`). Integer and
// floating-point datasets are converted by the library; other types are refused.
absl::StatusOr<Dataset> ReadDataset(const std::string& where, const std::string& path,
                                    const std::string& name, bool values) {
  SilenceHdf5();
  const std::string at = absl::StrCat(where, ": file '", path, "'");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(at, ": no such file"));
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": not an HDF5 file"));
  }
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return absl::InvalidArgumentError(absl::StrCat(at, ": cannot be opened"));
  if (H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    return absl::NotFoundError(absl::StrCat(at, ": has no dataset '", name, "'"));
  }
  H5Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": '", name, "' is not a dataset"));
  }
  H5Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const H5T_class_t type_class = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": dataset '", name, "' holds neither integers nor floating point"));
  }
  H5Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1 || rank > 32) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": dataset '", name, "' has rank ", rank,
                                                   " (it needs at least 1: rows first)"));
  }
  std::vector<hsize_t> extent(rank);
  H5Sget_simple_extent_dims(space.get(), extent.data(), nullptr);
  Dataset out;
  int64_t count = 1;
  for (hsize_t e : extent) {
    out.dims.push_back(static_cast<int64_t>(e));
    // Both factors stay at most 2^31 + 1, so the product cannot overflow.
    const int64_t factor = static_cast<int64_t>(std::min<hsize_t>(e, kMaxElements + 1));
    count = std::min(count * factor, kMaxElements + 1);
  }
  if (count > kMaxElements) {
    return absl::ResourceExhaustedError(absl::StrCat(at, ": dataset '", name, "' of [",
                                                     absl::StrJoin(out.dims, ","),
                                                     "] exceeds 2^31 elements"));
  }
  if (out.dims[0] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": dataset '", name, "' has no rows"));
  }
  if (!values) return out;
  try {
    out.data.resize(static_cast<size_t>(count));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(at, ": cannot allocate ", count * 4, " bytes for dataset '", name, "'"));
  }
  if (H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()) <
      0) {
    return absl::DataLossError(absl::StrCat(at, ": dataset '", name, "' cannot be read"));
  }
  return out;
}

// The list file's lines: one HDF5 file each, blank lines skipped.
absl::StatusOr<std::vector<std::string>> ReadFileList(const std::string& where,
                                                      const std::string& list) {
  std::ifstream in(list);
  if (!in) return absl::NotFoundError(absl::StrCat(where, ": cannot read the file list"));
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(list).parent_path();
  std::vector<std::string> files;
  std::string line;
  while (std::getline(in, line)) {
    std::string name(absl::StripAsciiWhitespace(line));
    if (name.empty()) continue;
    std::error_code ec;
    if (fs::path(name).is_relative() && !fs::exists(name, ec) && fs::exists(folder / name, ec)) {
      name = (folder / name).string();
    }
    files.push_back(name);
  }
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": lists no files"));
  return files;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Hdf5BatchSource>> Hdf5BatchSource::OpenDataLayer(
    const caffe::LayerParameter& layer, const std::string& resolved_source, uint64_t seed,
    int shard, int num_shards) {
  Hdf5BatchOptions options;
  options.name = layer.name();
  options.source = resolved_source;
  options.tops.assign(layer.top().begin(), layer.top().end());
  options.batch_size = layer.hdf5_data_param().batch_size();
  options.shuffle = layer.hdf5_data_param().shuffle();
  options.seed = seed;
  options.shard = shard;
  options.num_shards = num_shards;
  return Open(options);
}

absl::StatusOr<std::unique_ptr<Hdf5BatchSource>> Hdf5BatchSource::Open(
    const Hdf5BatchOptions& options) {
  std::unique_ptr<Hdf5BatchSource> s(new Hdf5BatchSource());
  s->options_ = options;
  s->where_ = absl::StrCat("data layer '", options.name, "': source '", options.source, "'");
  if (options.tops.empty())
    return absl::InvalidArgumentError(s->where_ + ": the layer has no tops");
  if (options.batch_size <= 0) {
    return absl::InvalidArgumentError(s->where_ + ": batch_size must be positive");
  }
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat(s->where_, ": shard ", options.shard, " of ", options.num_shards));
  }
  KILN_ASSIGN_OR_RETURN(s->files_, ReadFileList(s->where_, options.source));
  for (size_t f = 0; f < s->files_.size(); ++f) {
    int64_t rows = -1;
    for (size_t t = 0; t < options.tops.size(); ++t) {
      KILN_ASSIGN_OR_RETURN(Dataset d,
                            ReadDataset(s->where_, s->files_[f], options.tops[t], false));
      const std::vector<int64_t> row(d.dims.begin() + 1, d.dims.end());
      if (f == 0) {
        s->row_dims_.push_back(row);
        s->row_sizes_.push_back(
            std::accumulate(row.begin(), row.end(), int64_t{1}, std::multiplies<int64_t>()));
      } else if (row != s->row_dims_[t]) {
        return absl::InvalidArgumentError(
            absl::StrCat(s->where_, ": file '", s->files_[f], "': dataset '", options.tops[t],
                         "' has rows of [", absl::StrJoin(row, ","), "], the first file's have [",
                         absl::StrJoin(s->row_dims_[t], ","), "]"));
      }
      if (rows >= 0 && d.dims[0] != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(s->where_, ": file '", s->files_[f], "': dataset '", options.tops[t],
                         "' has ", d.dims[0], " rows, '", options.tops[0], "' has ", rows));
      }
      rows = d.dims[0];
    }
    s->total_rows_ += rows;
  }
  for (size_t t = 0; t < options.tops.size(); ++t) {
    if (s->row_sizes_[t] * options.batch_size > kMaxElements) {
      return absl::ResourceExhaustedError(
          absl::StrCat(s->where_, ": a batch of '", options.tops[t], "' exceeds 2^31 elements"));
    }
  }
  s->Rewind();
  KILN_RETURN_IF_ERROR(s->Seek(0));
  return s;
}

std::vector<std::vector<int64_t>> Hdf5BatchSource::BatchDims() const {
  std::vector<std::vector<int64_t>> dims;
  for (const std::vector<int64_t>& row : row_dims_) {
    std::vector<int64_t> d = {options_.batch_size};
    d.insert(d.end(), row.begin(), row.end());
    dims.push_back(d);
  }
  return dims;
}

void Hdf5BatchSource::Rewind() {
  rng_.seed(options_.seed);
  file_order_.resize(files_.size());
  std::iota(file_order_.begin(), file_order_.end(), size_t{0});
  if (options_.shuffle) std::shuffle(file_order_.begin(), file_order_.end(), rng_);
  next_file_ = 0;
  loaded_.clear();
  row_order_.clear();
  next_row_ = 0;
  served_ = 0;
}

absl::Status Hdf5BatchSource::LoadNextFile() {
  if (next_file_ == file_order_.size()) {  // a new pass over the list
    if (options_.shuffle) std::shuffle(file_order_.begin(), file_order_.end(), rng_);
    next_file_ = 0;
  }
  const std::string& path = files_[file_order_[next_file_++]];
  loaded_.clear();
  int64_t rows = 0;
  for (size_t t = 0; t < options_.tops.size(); ++t) {
    KILN_ASSIGN_OR_RETURN(Dataset d, ReadDataset(where_, path, options_.tops[t], true));
    // A file replaced since the open is checked again: the batch shapes are fixed.
    if (std::vector<int64_t>(d.dims.begin() + 1, d.dims.end()) != row_dims_[t] ||
        (t > 0 && d.dims[0] != rows)) {
      return absl::DataLossError(absl::StrCat(where_, ": file '", path, "': dataset '",
                                              options_.tops[t], "' changed shape since the start"));
    }
    rows = d.dims[0];
    loaded_.push_back(std::move(d.data));
  }
  row_order_.resize(rows);
  std::iota(row_order_.begin(), row_order_.end(), int64_t{0});
  if (options_.shuffle) std::shuffle(row_order_.begin(), row_order_.end(), rng_);
  next_row_ = 0;
  return absl::OkStatus();
}

absl::Status Hdf5BatchSource::Advance(std::vector<std::vector<float>>* values) {
  if (values != nullptr) {
    values->resize(options_.tops.size());
    for (size_t t = 0; t < options_.tops.size(); ++t) {
      (*values)[t].resize(static_cast<size_t>(options_.batch_size * row_sizes_[t]));
    }
  }
  for (int64_t r = 0; r < options_.batch_size; ++r) {
    if (next_row_ == static_cast<int64_t>(row_order_.size())) KILN_RETURN_IF_ERROR(LoadNextFile());
    const int64_t row = row_order_[next_row_++];
    if (values == nullptr) continue;
    for (size_t t = 0; t < options_.tops.size(); ++t) {
      const float* from = loaded_[t].data() + row * row_sizes_[t];
      std::copy(from, from + row_sizes_[t], (*values)[t].data() + r * row_sizes_[t]);
    }
  }
  return absl::OkStatus();
}

absl::Status Hdf5BatchSource::NextBatch(std::vector<std::vector<float>>& values) {
  KILN_RETURN_IF_ERROR(Advance(&values));
  // The other shards' batches until this shard's next one.
  for (int s = 1; s < options_.num_shards; ++s) KILN_RETURN_IF_ERROR(Advance(nullptr));
  ++served_;
  return absl::OkStatus();
}

absl::Status Hdf5BatchSource::Seek(int64_t served) {
  if (served < 0) return absl::InvalidArgumentError(where_ + ": cannot seek before the start");
  Rewind();
  // Replaying the skipped batches draws the same permutations as serving them did.
  const int64_t skip = served * options_.num_shards + options_.shard;
  for (int64_t b = 0; b < skip; ++b) KILN_RETURN_IF_ERROR(Advance(nullptr));
  served_ = served;
  return absl::OkStatus();
}

}  // namespace kiln
