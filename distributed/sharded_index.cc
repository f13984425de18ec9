#include "distributed/sharded_index.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

// The random streams of frontends/caffe/data/datum_batch_source.cc, so both give the same
// permutations: SplitMix64's finalizer separates (seed, stream), a seed_seq of its two halves seeds
// a 64-bit Mersenne Twister, and Fisher-Yates takes the generator's output modulo i+1
// (std::shuffle's algorithm is unspecified, this is the same with every standard library).
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

}  // namespace

int64_t RandSkipStart(uint64_t seed, int rand_skip) {
  if (rand_skip <= 0) return 0;
  return static_cast<int64_t>(Generator(Mix(seed, 0))() % static_cast<uint64_t>(rand_skip));
}

absl::StatusOr<ShardedIndex> ShardedIndex::Create(const ShardingOptions& options) {
  if (options.dataset_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding: the dataset has ", options.dataset_size, " records"));
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding: rank ", options.rank, " is not a rank of a world of size ", options.world_size));
  }
  if (options.start < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding: start position ", options.start, " is negative"));
  }
  return ShardedIndex(options);
}

int64_t ShardedIndex::Position(int64_t k) const {
  return options_.start + k * options_.world_size + options_.rank;
}

std::vector<int64_t> ShardedIndex::Permutation(int64_t epoch) const {
  const int64_t n = options_.dataset_size;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (!options_.shuffle) return order;
  std::mt19937_64 rng = Generator(Mix(Mix(options_.seed, 1), static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng() % static_cast<uint64_t>(i + 1)]);
  }
  return order;
}

int64_t ShardedIndex::RecordAtPosition(int64_t p) const {
  const int64_t n = options_.dataset_size;
  if (!options_.shuffle) return p % n;
  return Permutation(p / n)[p % n];
}

absl::StatusOr<std::vector<int64_t>> ShardedIndex::Records(int64_t first, int64_t count) const {
  if (first < 0 || count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding: records ", first, " + ", count, " (both must be >= 0)"));
  }
  const int64_t n = options_.dataset_size;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  int64_t epoch = -1;
  std::vector<int64_t> order;  // the current epoch's, computed once per epoch touched
  for (int64_t k = first; k < first + count; ++k) {
    const int64_t p = Position(k);
    if (p / n != epoch) {
      epoch = p / n;
      order = Permutation(epoch);
    }
    out.push_back(order[p % n]);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ShardedIndex::EpochRecords(int64_t epoch) const {
  if (epoch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sharding: epoch ", epoch, " is negative"));
  }
  const int64_t n = options_.dataset_size;
  const int64_t w = options_.world_size;
  const int64_t begin = std::max(epoch * n, options_.start);
  const int64_t end = (epoch + 1) * n;
  // This rank's positions are start + rank + k*W: the first k whose position is >= begin.
  const int64_t base = options_.start + options_.rank;
  int64_t k = begin <= base ? 0 : (begin - base + w - 1) / w;
  const std::vector<int64_t> order = Permutation(epoch);
  std::vector<int64_t> out;
  for (int64_t p = base + k * w; p < end; p += w) out.push_back(order[p - epoch * n]);
  return out;
}

}  // namespace kiln
