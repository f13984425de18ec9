// Hdf5BatchSource (Caffe's HDF5Data layer) on HDF5 files the test writes: batch shapes, list
// order and wrap-around across files, the seeded shuffle, Seek, batch-strided shards, type
// conversion, and a status for every malformed list, file and dataset.
#include "frontends/caffe/data/hdf5_batch_source.h"

#include <hdf5.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/hdf5_files.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

using Array = testing::H5Array;
using testing::WriteH5;

// `rows` rows of `width` values: row r of file `f` holds f * 1000 + r * 10 + column.
Array Rows(int f, int rows, int width) {
  Array a;
  a.dims = {static_cast<uint64_t>(rows), static_cast<uint64_t>(width)};
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < width; ++c) a.values.push_back(f * 1000 + r * 10 + c);
  }
  return a;
}

// A list file naming `files` (one per line, blank lines between).
std::string WriteList(const std::string& name, const std::vector<std::string>& files) {
  const std::string path = ScratchFile(name);
  std::ofstream out(path);
  for (const std::string& f : files) out << f << "\n\n";
  return path;
}

// Two files of 5 and 4 rows, datasets "data" (rows of 3) and "label" (rows of 1).
std::string TwoFiles(const std::string& prefix) {
  const std::string a = ScratchFile(prefix + "_a.h5"), b = ScratchFile(prefix + "_b.h5");
  Array la = Rows(0, 5, 1), lb = Rows(1, 4, 1);
  la.dims = {5};  // rank-1 datasets: rows of one value
  lb.dims = {4};
  WriteH5(a, {{"data", Rows(0, 5, 3)}, {"label", la}});
  WriteH5(b, {{"data", Rows(1, 4, 3)}, {"label", lb}});
  return WriteList(prefix + "_list.txt", {a, b});
}

Hdf5BatchOptions Options(const std::string& list, int64_t batch) {
  Hdf5BatchOptions o;
  o.name = "h5";
  o.source = list;
  o.tops = {"data", "label"};
  o.batch_size = batch;
  return o;
}

// The first value of each row of the next `batches` batches of top 0 (the row's identity).
std::vector<int> RowIds(Hdf5BatchSource& source, int batches) {
  std::vector<int> ids;
  std::vector<std::vector<float>> values;
  for (int b = 0; b < batches; ++b) {
    EXPECT_TRUE(source.NextBatch(values).ok());
    const size_t width = values[0].size() / source.BatchDims()[0][0];
    for (size_t i = 0; i < values[0].size(); i += width)
      ids.push_back(static_cast<int>(values[0][i]));
  }
  return ids;
}

TEST(Hdf5BatchSourceTest, BatchesRunThroughTheFilesInListOrderAndWrap) {
  auto source = Hdf5BatchSource::Open(Options(TwoFiles("order"), 3));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->BatchDims(), (std::vector<std::vector<int64_t>>{{3, 3}, {3}}));
  EXPECT_EQ((*source)->total_rows(), 9);
  std::vector<std::vector<float>> values;
  ASSERT_TRUE((*source)->NextBatch(values).ok());
  EXPECT_EQ(values[0], (std::vector<float>{0, 1, 2, 10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(values[1], (std::vector<float>{0, 10, 20}));
  // A batch across the two files, then the wrap to the first file again.
  EXPECT_EQ(RowIds(**source, 3), (std::vector<int>{30, 40, 1000, 1010, 1020, 1030, 0, 10, 20}));
  EXPECT_EQ((*source)->BatchesServed(), 4);
}

TEST(Hdf5BatchSourceTest, ShuffleServesEveryRowOncePerPassSeededAndNewEachPass) {
  Hdf5BatchOptions o = Options(TwoFiles("shuffle"), 3);
  o.shuffle = true;
  o.seed = 7;
  auto a = Hdf5BatchSource::Open(o);
  auto b = Hdf5BatchSource::Open(o);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int> pass1 = RowIds(**a, 3), pass2 = RowIds(**a, 3);
  EXPECT_EQ(RowIds(**b, 6), [&] {
    std::vector<int> both = pass1;
    both.insert(both.end(), pass2.begin(), pass2.end());
    return both;
  }());
  const std::set<int> all = {0, 10, 20, 30, 40, 1000, 1010, 1020, 1030};
  EXPECT_EQ(std::set<int>(pass1.begin(), pass1.end()), all);
  EXPECT_EQ(std::set<int>(pass2.begin(), pass2.end()), all);
  EXPECT_NE(pass1, (std::vector<int>{0, 10, 20, 30, 40, 1000, 1010, 1020, 1030}));
  EXPECT_NE(pass1, pass2);
}

TEST(Hdf5BatchSourceTest, SeekContinuesExactlyWhereServingWouldHave) {
  Hdf5BatchOptions o = Options(TwoFiles("seek"), 2);
  o.shuffle = true;
  auto served = Hdf5BatchSource::Open(o);
  auto sought = Hdf5BatchSource::Open(o);
  ASSERT_TRUE(served.ok() && sought.ok());
  RowIds(**served, 7);
  const std::vector<int> next = RowIds(**served, 4);
  ASSERT_TRUE((*sought)->Seek(7).ok());
  EXPECT_EQ((*sought)->BatchesServed(), 7);
  EXPECT_EQ(RowIds(**sought, 4), next);
  EXPECT_FALSE((*sought)->Seek(-1).ok());
}

TEST(Hdf5BatchSourceTest, ShardsTakeWholeBatchesInTurn) {
  const std::string list = TwoFiles("shards");
  auto whole = Hdf5BatchSource::Open(Options(list, 2));
  ASSERT_TRUE(whole.ok());
  const std::vector<int> all = RowIds(**whole, 6);
  for (int shard = 0; shard < 2; ++shard) {
    Hdf5BatchOptions o = Options(list, 2);
    o.shard = shard;
    o.num_shards = 2;
    auto part = Hdf5BatchSource::Open(o);
    ASSERT_TRUE(part.ok());
    const std::vector<int> mine = RowIds(**part, 3);
    for (int b = 0; b < 3; ++b) {
      EXPECT_EQ(mine[2 * b], all[2 * (2 * b + shard)]) << "shard " << shard << " batch " << b;
      EXPECT_EQ(mine[2 * b + 1], all[2 * (2 * b + shard) + 1]);
    }
  }
}

TEST(Hdf5BatchSourceTest, IntegerAndDoubleDatasetsAreReadAsFloat) {
  const std::string path = ScratchFile("types.h5");
  Array ints = {{2, 2}, {1, -2, 3, 70000}, testing::H5FileType::kI32};
  Array doubles = {{2}, {0.5, 1e-3}, testing::H5FileType::kF64};
  WriteH5(path, {{"data", ints}, {"label", doubles}});
  auto source = Hdf5BatchSource::Open(Options(WriteList("types.txt", {path}), 2));
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<std::vector<float>> values;
  ASSERT_TRUE((*source)->NextBatch(values).ok());
  EXPECT_EQ(values[0], (std::vector<float>{1, -2, 3, 70000}));
  EXPECT_EQ(values[1], (std::vector<float>{0.5f, 1e-3f}));
}

TEST(Hdf5BatchSourceTest, RelativeNamesInTheListAreFoundBesideIt) {
  WriteH5(ScratchFile("beside.h5"), {{"data", Rows(0, 2, 3)}, {"label", Rows(0, 2, 1)}});
  auto source = Hdf5BatchSource::Open(Options(WriteList("beside.txt", {"beside.h5"}), 1));
  EXPECT_TRUE(source.ok()) << source.status();
}

// Every malformed input is a status naming the layer and the culprit.
TEST(Hdf5BatchSourceTest, ErrorsNameTheLayerTheFileAndTheDataset) {
  const std::string good = ScratchFile("good.h5");
  WriteH5(good, {{"data", Rows(0, 4, 3)}, {"label", Rows(0, 4, 1)}});
  const std::string other_rows = ScratchFile("other_rows.h5");
  WriteH5(other_rows, {{"data", Rows(0, 4, 3)}, {"label", Rows(0, 3, 1)}});
  const std::string other_width = ScratchFile("other_width.h5");
  WriteH5(other_width, {{"data", Rows(0, 4, 2)}, {"label", Rows(0, 4, 1)}});
  const std::string no_label = ScratchFile("no_label.h5");
  WriteH5(no_label, {{"data", Rows(0, 4, 3)}});
  const std::string not_h5 = ScratchFile("not_h5.h5");
  std::ofstream(not_h5) << "plain text, not HDF5";
  const std::string scalar = ScratchFile("scalar.h5");
  WriteH5(scalar, {{"data", {{}, {1.0}}}, {"label", Rows(0, 1, 1)}});

  struct Case {
    std::string what;
    std::vector<std::string> files;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"missing file", {good, ScratchFile("nowhere.h5")}, "nowhere.h5': no such file"},
      {"missing dataset", {no_label}, "has no dataset 'label'"},
      {"rows differ between datasets", {other_rows}, "has 3 rows, 'data' has 4"},
      {"row shape differs between files", {good, other_width}, "has rows of [2], the first"},
      {"not HDF5", {not_h5}, "not an HDF5 file"},
      {"rank 0", {scalar}, "has rank 0"},
      {"empty list", {}, "lists no files"},
  };
  for (const Case& c : cases) {
    auto source = Hdf5BatchSource::Open(Options(WriteList("errors.txt", c.files), 2));
    ASSERT_FALSE(source.ok()) << c.what;
    EXPECT_NE(source.status().ToString().find("data layer 'h5'"), std::string::npos)
        << c.what << ": " << source.status();
    EXPECT_NE(source.status().ToString().find(c.expect), std::string::npos)
        << c.what << ": " << source.status();
  }
  EXPECT_FALSE(Hdf5BatchSource::Open(Options(ScratchFile("no_list.txt"), 2)).ok());
  EXPECT_FALSE(Hdf5BatchSource::Open(Options(WriteList("zero.txt", {good}), 0)).ok());
  Hdf5BatchOptions bad_shard = Options(WriteList("shard.txt", {good}), 2);
  bad_shard.shard = 2;
  bad_shard.num_shards = 2;
  EXPECT_FALSE(Hdf5BatchSource::Open(bad_shard).ok());
}

// A file may declare an extent it never stores (chunked, unwritten): refused before allocating.
TEST(Hdf5BatchSourceTest, AHugeDeclaredDatasetIsRefusedWithoutAllocating) {
  const std::string path = ScratchFile("huge.h5");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {hsize_t{1} << 20, hsize_t{1} << 20}, chunk[2] = {64, 64};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(plist, 2, chunk);
  for (const char* name : {"data", "label"}) {
    hid_t set = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    ASSERT_GE(set, 0);
    H5Dclose(set);
  }
  H5Pclose(plist);
  H5Sclose(space);
  H5Fclose(file);
  auto source = Hdf5BatchSource::Open(Options(WriteList("huge.txt", {path}), 2));
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kResourceExhausted) << source.status();
}

}  // namespace
}  // namespace kiln
