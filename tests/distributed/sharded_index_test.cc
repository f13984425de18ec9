// Data sharding: within every epoch the ranks' records are disjoint and cover the dataset (the
// remainder neither dropped nor padded), W ranks of batch B read together what one rank of
// batch W*B reads, the order is Caffe 1.0's (position mod W), and DatumBatchSource's shards read
// exactly the records ShardedIndex predicts, in key order and shuffled, with a rand_skip start.
#include "distributed/sharded_index.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

ShardedIndex Make(int64_t d, int w, int r, bool shuffle = false, int64_t start = 0,
                  uint64_t seed = 5) {
  ShardingOptions o;
  o.dataset_size = d;
  o.world_size = w;
  o.rank = r;
  o.shuffle = shuffle;
  o.seed = seed;
  o.start = start;
  absl::StatusOr<ShardedIndex> index = ShardedIndex::Create(o);
  EXPECT_TRUE(index.ok()) << index.status();
  return *index;
}

TEST(ShardedIndexTest, CaffeStrideOrderInKeyOrder) {
  // Caffe 1.0: each solver keeps the records whose stream offset mod solver_count is its rank.
  EXPECT_EQ(*Make(5, 2, 0).Records(0, 6), (std::vector<int64_t>{0, 2, 4, 1, 3, 0}));
  EXPECT_EQ(*Make(5, 2, 1).Records(0, 6), (std::vector<int64_t>{1, 3, 0, 2, 4, 1}));
  EXPECT_EQ(*Make(5, 2, 1).Records(2, 2), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(Make(5, 2, 1).Position(2), 5);
  // One rank reads the database in order, wrapping.
  EXPECT_EQ(*Make(3, 1, 0).Records(0, 7), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(ShardedIndexTest, EveryEpochIsSplitDisjointlyAndCompletely) {
  for (bool shuffle : {false, true}) {
    for (int64_t d = 1; d <= 13; ++d) {
      for (int w = 1; w <= 5; ++w) {
        for (int64_t start : {int64_t{0}, int64_t{3}}) {
          for (int64_t epoch = 0; epoch < 4; ++epoch) {
            SCOPED_TRACE(absl::StrCat("D=", d, " W=", w, " start=", start, " epoch=", epoch,
                                      " shuffle=", shuffle));
            std::multiset<int64_t> seen;
            size_t smallest = SIZE_MAX, largest = 0;
            for (int r = 0; r < w; ++r) {
              absl::StatusOr<std::vector<int64_t>> records =
                  Make(d, w, r, shuffle, start).EpochRecords(epoch);
              ASSERT_TRUE(records.ok()) << records.status();
              seen.insert(records->begin(), records->end());
              smallest = std::min(smallest, records->size());
              largest = std::max(largest, records->size());
            }
            // Positions before `start` are never read: epoch 0 may be short by them.
            const int64_t skipped = std::max<int64_t>(0, std::min(d, start - epoch * d));
            EXPECT_EQ(static_cast<int64_t>(seen.size()), d - skipped);
            EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size())
                << "a record was read twice";
            for (int64_t rec : seen) EXPECT_TRUE(rec >= 0 && rec < d);
            if (skipped == 0) {
              EXPECT_LE(largest - smallest, 1u) << "uneven beyond one record";
            }
          }
        }
      }
    }
  }
}

TEST(ShardedIndexTest, EpochRecordsAgreeWithTheStream) {
  // A rank's stream, cut at the epoch boundaries, is its EpochRecords one epoch after another.
  for (bool shuffle : {false, true}) {
    const int64_t d = 11;
    const int w = 3;
    for (int r = 0; r < w; ++r) {
      const ShardedIndex index = Make(d, w, r, shuffle, /*start=*/4);
      std::vector<int64_t> concatenated;
      for (int64_t e = 0; e < 5; ++e) {
        std::vector<int64_t> part = *index.EpochRecords(e);
        concatenated.insert(concatenated.end(), part.begin(), part.end());
      }
      EXPECT_EQ(*index.Records(0, static_cast<int64_t>(concatenated.size())), concatenated);
    }
  }
}

TEST(ShardedIndexTest, RanksOfBatchBReadWhatOneRankOfBatchWBReads) {
  for (bool shuffle : {false, true}) {
    const int64_t d = 23;  // not a multiple of anything below: epochs end inside batches
    const int w = 4, b = 3;
    const ShardedIndex single = Make(d, 1, 0, shuffle, 2);
    for (int64_t step = 0; step < 12; ++step) {
      std::multiset<int64_t> together;
      for (int r = 0; r < w; ++r) {
        std::vector<int64_t> batch = *Make(d, w, r, shuffle, 2).Records(step * b, b);
        together.insert(batch.begin(), batch.end());
      }
      std::vector<int64_t> big = *single.Records(step * w * b, w * b);
      EXPECT_EQ(together, std::multiset<int64_t>(big.begin(), big.end())) << "step " << step;
    }
  }
}

TEST(ShardedIndexTest, ShuffleIsSharedByRanksAndChangesEveryEpoch) {
  const ShardedIndex a = Make(50, 2, 0, true, 0, 9);
  const ShardedIndex b = Make(50, 2, 1, true, 0, 9);
  std::vector<int64_t> p0 = a.Permutation(0);
  EXPECT_EQ(p0, b.Permutation(0));
  EXPECT_NE(p0, a.Permutation(1));
  EXPECT_NE(p0, Make(50, 2, 0, true, 0, 10).Permutation(0));
  std::vector<int64_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Make(50, 1, 0).Permutation(0));  // a permutation of 0..49
  EXPECT_NE(p0, sorted);
}

TEST(ShardedIndexTest, BadOptionsAreInvalidArgument) {
  ShardingOptions o;
  o.dataset_size = 0;
  EXPECT_EQ(ShardedIndex::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.dataset_size = 10;
  o.world_size = 2;
  o.rank = 2;
  EXPECT_EQ(ShardedIndex::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = -1;
  EXPECT_EQ(ShardedIndex::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.start = -1;
  EXPECT_EQ(ShardedIndex::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  const ShardedIndex index = Make(10, 2, 0);
  EXPECT_EQ(index.Records(-1, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index.Records(0, -2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index.EpochRecords(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RandSkipStart(3, 0), 0);
}

// ---------------------------------------------------------------------------------------------
// DatumBatchSource (data/) reads the stream ShardedIndex describes.

std::string RecordDb(int n) {
  const std::string path = ScratchFile(absl::StrCat("sharded_", n, "_lmdb"));
  DatumWriterOptions options;
  options.overwrite = true;
  auto writer = DatumWriter::Open(path, DbBackend::kLmdb, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int i = 0; i < n; ++i) {
    caffe::Datum d;
    d.set_channels(1);
    d.set_height(1);
    d.set_width(1);
    d.set_data(std::string(1, static_cast<char>(i)));
    d.set_label(i);  // the label names the record
    EXPECT_TRUE((*writer)->Put(DatumKey(i), d).ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

TEST(ShardedIndexTest, BatchSourceShardsReadThePredictedRecords) {
  const int d = 10, w = 3, batch = 4;
  const std::string db = RecordDb(d);
  for (bool shuffle : {false, true}) {
    for (int rand_skip : {0, 7}) {
      const uint64_t seed = 21;
      const int64_t start = RandSkipStart(seed, rand_skip);
      for (int r = 0; r < w; ++r) {
        SCOPED_TRACE(absl::StrCat("shuffle=", shuffle, " rand_skip=", rand_skip, " rank ", r));
        DatumBatchOptions o;
        o.name = "data";
        o.source = db;
        o.backend = DbBackend::kLmdb;
        o.batch_size = batch;
        o.rand_skip = rand_skip;
        o.seed = seed;
        o.shuffle = shuffle;
        o.shard = r;
        o.num_shards = w;
        o.prefetch = 1;
        absl::StatusOr<std::unique_ptr<DatumBatchSource>> source = DatumBatchSource::Open(o);
        ASSERT_TRUE(source.ok()) << source.status();
        const ShardedIndex index = Make(d, w, r, shuffle, start, seed);
        for (int step = 0; step < 6; ++step) {
          Batch b;
          ASSERT_TRUE((*source)->Next(&b).ok());
          std::vector<int64_t> labels(b.labels.begin(), b.labels.end());
          EXPECT_EQ(labels, *index.Records(int64_t{step} * batch, batch)) << "batch " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln
