#include "training/memory_batch_source.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<MemoryBatchSource>> MemoryBatchSource::Create(
    std::vector<float> examples, std::vector<int64_t> example_dims, std::vector<float> labels,
    const MemoryBatchOptions& options) {
  int64_t example_size = 1;
  for (int64_t d : example_dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory batches: example dimension ", d, " is not positive"));
    }
    // The values are already in memory, so a true size fits; a larger product is a wrong shape.
    if (example_size > static_cast<int64_t>(examples.size()) / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory batches: examples of shape [", absl::StrJoin(example_dims, ","),
                       "] are larger than the ", examples.size(), " values given"));
    }
    example_size *= d;
  }
  if (examples.empty() || examples.size() % static_cast<size_t>(example_size) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("memory batches: ", examples.size(),
                                                   " values are not a whole number of examples of ",
                                                   example_size, " values"));
  }
  const int64_t count = static_cast<int64_t>(examples.size()) / example_size;
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory batches: ", labels.size(), " labels for ", count, " examples"));
  }
  if (options.batch_size < 1 || options.batch_size > count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory batches: batch size ", options.batch_size, " for ", count, " examples"));
  }
  std::unique_ptr<MemoryBatchSource> s(new MemoryBatchSource());
  s->examples_ = std::move(examples);
  s->labels_ = std::move(labels);
  s->example_dims_ = std::move(example_dims);
  s->example_size_ = example_size;
  s->count_ = count;
  s->options_ = options;
  s->rng_.seed(options.seed);
  s->order_.resize(static_cast<size_t>(count));
  s->Reorder();
  return s;
}

void MemoryBatchSource::Reorder() {
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.shuffle) std::shuffle(order_.begin(), order_.end(), rng_);
}

std::vector<std::vector<int64_t>> MemoryBatchSource::BatchDims() const {
  std::vector<int64_t> data = {options_.batch_size};
  data.insert(data.end(), example_dims_.begin(), example_dims_.end());
  std::vector<std::vector<int64_t>> dims = {data};
  if (!labels_.empty()) dims.push_back({options_.batch_size});
  return dims;
}

absl::Status MemoryBatchSource::NextBatch(std::vector<std::vector<float>>& values) {
  const size_t n = static_cast<size_t>(options_.batch_size);
  values.resize(labels_.empty() ? 1 : 2);
  values[0].resize(n * static_cast<size_t>(example_size_));
  if (!labels_.empty()) values[1].resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (cursor_ == count_) {  // an epoch ends: wrap around, as Caffe's data layers do
      cursor_ = 0;
      ++epoch_;
      Reorder();
    }
    const int64_t e = order_[static_cast<size_t>(cursor_++)];
    std::copy_n(examples_.begin() + e * example_size_, example_size_,
                values[0].begin() + static_cast<int64_t>(i) * example_size_);
    if (!labels_.empty()) values[1][i] = labels_[static_cast<size_t>(e)];
  }
  ++served_;
  return absl::OkStatus();
}

absl::Status MemoryBatchSource::Seek(int64_t served) {
  if (served < 0 || served > std::numeric_limits<int64_t>::max() / options_.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory batches: cannot seek to batch ", served));
  }
  // The state NextBatch reaches after `served` batches: the permutation of each epoch passed
  // is drawn (the generator advances the same way), then the cursor set inside the last one.
  const int64_t examples = served * options_.batch_size;
  rng_.seed(options_.seed);
  epoch_ = 0;
  Reorder();
  cursor_ = examples;
  while (cursor_ > count_) {  // an epoch boundary is crossed when the cursor passes the end
    cursor_ -= count_;
    ++epoch_;
    Reorder();
  }
  served_ = served;
  return absl::OkStatus();
}

}  // namespace kiln
