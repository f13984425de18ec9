// Damaged LMDB files through the Data layer's user-facing path (DatumBatchSource: open, then read
// batches): a truncated data.mdb at several points, flipped bytes in the meta, branch and leaf
// pages, and a sweep of single-byte flips over those pages. Every case ends in an error that names
// the file (or reads fine when the flip hit bytes nothing depends on); none may abort or crash,
// which before the file check were liblmdb's assert ("IS_LEAF(mp)") and SIGBUS.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/datum_db.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr int kRecords = 300;

std::string BaseDir() {
  const std::string any = ScratchFile("x");
  return any.substr(0, any.rfind('/'));
}

// Record i: a 1x8x8 datum; every 50th (from 7 on) also carries 3 KB in a field Datum does not
// define (parsed and ignored), so that its value is large enough to go to overflow pages.
caffe::Datum Record(int i) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(8);
  d.set_width(8);
  d.set_data(std::string(64, static_cast<char>(i)));
  d.set_label(i % 10);
  if (i % 50 == 7) {
    d.GetReflection()->MutableUnknownFields(&d)->AddLengthDelimited(100, std::string(3000, 'x'));
  }
  return d;
}

// A fresh copy of the good database under `name`; returns its folder name (relative to BaseDir).
std::string FreshDb(const std::string& name) {
  DatumWriterOptions options;
  options.overwrite = true;
  auto writer = DatumWriter::Open(ScratchFile(name), DbBackend::kLmdb, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int i = 0; i < kRecords; ++i) EXPECT_TRUE((*writer)->Put(DatumKey(i), Record(i)).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return name;
}

std::string DataFile(const std::string& name) { return ScratchFile(name + "/data.mdb"); }

std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(WriteFileBytes(path, bytes).ok());
}

template <typename T>
T At(const std::string& bytes, size_t offset) {
  T value{};
  if (offset + sizeof(T) <= bytes.size()) std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// The facts of the file the tests aim at (LMDB's 64-bit layout): page size, the newer meta page,
// the main tree's root and depth, a leaf page and a page holding a value's overflow run.
struct Layout {
  uint64_t page_size = 0;
  uint64_t meta = 0;  // byte offset of the newer meta page
  uint64_t root = 0;
  int depth = 0;
  uint64_t leaf = 0;  // the root's first child when the root is a branch
};

Layout Inspect(const std::string& bytes) {
  Layout l;
  l.page_size = At<uint32_t>(bytes, 40);
  const uint64_t second = l.page_size;
  l.meta = At<uint64_t>(bytes, second + 144) > At<uint64_t>(bytes, 144) ? second : 0;
  l.root = At<uint64_t>(bytes, l.meta + 88 + 40);
  l.depth = At<uint16_t>(bytes, l.meta + 88 + 6);
  const uint64_t root = l.root * l.page_size;
  const uint64_t node = root + At<uint16_t>(bytes, root + 16);  // node 0
  l.leaf = At<uint32_t>(bytes, node) | (uint64_t{At<uint16_t>(bytes, node + 4)} << 32);
  return l;
}

struct Outcome {
  absl::Status status;  // OK when the database opened and every batch read
  int batches = 0;
};

// Opens the database as a Data layer and reads two passes of batches (in key order, or shuffled,
// which reads by key).
Outcome OpenAndRead(const std::string& db, bool shuffle = false, int passes = 2) {
  caffe::LayerParameter layer;
  EXPECT_TRUE(ParseTextMessage(absl::StrCat("name: 'train' type: 'Data' top: 'data' top: 'label' "
                                            "data_param { source: '",
                                            db, "' backend: LMDB batch_size: 32 }"),
                               "layer", layer)
                  .ok());
  Outcome out;
  auto source = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), 1, shuffle);
  if (!source.ok()) {
    out.status = source.status();
    return out;
  }
  Batch batch;
  for (int i = 0; i < passes * kRecords / 32 + 1; ++i) {
    out.status = (*source)->Next(&batch);
    if (!out.status.ok()) return out;
    ++out.batches;
  }
  return out;
}

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

TEST(BrokenLmdbTest, TheGoodDatabaseReads) {
  const std::string db = FreshDb("good_lmdb");
  const Layout l = Inspect(ReadAll(DataFile(db)));
  EXPECT_GE(l.depth, 2) << "the tests need a branch page";
  EXPECT_EQ(fs::file_size(DataFile(db)) % l.page_size, 0u);
  for (bool shuffle : {false, true}) {
    const Outcome out = OpenAndRead(db, shuffle);
    EXPECT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.batches, 2 * kRecords / 32 + 1);
  }
}

TEST(BrokenLmdbTest, TruncatedFileIsAnErrorWithBothSizes) {
  const std::string good = ReadAll(DataFile(FreshDb("trunc_src_lmdb")));
  const Layout l = Inspect(good);
  const std::vector<size_t> cuts = {0,
                                    1,
                                    100,
                                    l.page_size - 1,
                                    l.page_size + 100,
                                    2 * l.page_size,
                                    3 * l.page_size + 17,
                                    good.size() / 2,
                                    good.size() - l.page_size,
                                    good.size() - 1};
  for (size_t cut : cuts) {
    SCOPED_TRACE(absl::StrCat("cut at ", cut, " of ", good.size()));
    const std::string db = FreshDb("trunc_lmdb");
    WriteAll(DataFile(db), good.substr(0, cut));
    for (bool shuffle : {false, true}) {
      const Outcome out = OpenAndRead(db, shuffle);
      EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument) << out.status;
      EXPECT_TRUE(Contains(out.status.message(), "data layer 'train': source 'trunc_lmdb'"))
          << out.status;
      EXPECT_TRUE(Contains(out.status.message(), DataFile(db))) << out.status;
      EXPECT_TRUE(Contains(out.status.message(), "truncated")) << out.status;
      if (cut >= 2 * l.page_size) {
        EXPECT_TRUE(Contains(out.status.message(), "truncated: its meta page declares"))
            << out.status;
        EXPECT_TRUE(
            Contains(out.status.message(), absl::StrCat("but the file has ", cut, " bytes")))
            << out.status;
      }
    }
  }
}

// Changes the bytes at `offset` of a fresh copy and returns what reading it gives.
Outcome WithBytes(const std::string& good, uint64_t offset, const std::string& bytes,
                  bool shuffle = false) {
  std::string damaged = good;
  damaged.replace(offset, bytes.size(), bytes);
  const std::string db = FreshDb("flip_lmdb");
  WriteAll(DataFile(db), damaged);
  return OpenAndRead(db, shuffle);
}

std::string Bytes(uint64_t value, size_t size) {
  std::string s(size, '\0');
  std::memcpy(&s[0], &value, size);
  return s;
}

void ExpectDamaged(const Outcome& out, absl::string_view what) {
  EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument) << out.status;
  EXPECT_TRUE(Contains(out.status.message(), "source 'flip_lmdb'")) << out.status;
  EXPECT_TRUE(Contains(out.status.message(), DataFile("flip_lmdb"))) << out.status;
  EXPECT_TRUE(Contains(out.status.message(), what)) << out.status;
}

TEST(BrokenLmdbTest, DamagedBranchPageIsALocatedError) {
  const std::string good = ReadAll(DataFile(FreshDb("branch_src_lmdb")));
  const Layout l = Inspect(good);
  const uint64_t root = l.root * l.page_size;
  // The root marked a leaf: liblmdb's cursor asserted IS_LEAF / IS_BRANCH on it.
  ExpectDamaged(WithBytes(good, root + 10, Bytes(0x02, 2)),
                absl::StrCat("damaged page ", l.root, " (branch level 1 of ", l.depth, ")"));
  // Its page number field overwritten.
  ExpectDamaged(WithBytes(good, root, Bytes(12345, 8)), "its header says page 12345");
  // A child pointer past the end of the file (node 1's page number, high half).
  const uint64_t node1 = root + At<uint16_t>(good, root + 18);
  ExpectDamaged(WithBytes(good, node1 + 4, Bytes(0x7fff, 2)), "outside pages 2 to");
  // A child pointer to a meta page, and to the root itself.
  ExpectDamaged(WithBytes(good, node1, Bytes(1, 2) + Bytes(0, 2) + Bytes(0, 2)), "page 1");
  ExpectDamaged(WithBytes(good, node1, Bytes(l.root, 2) + Bytes(0, 2) + Bytes(0, 2)),
                "reached twice");
  // The free-space bounds beyond the page, and a node offset outside it.
  ExpectDamaged(WithBytes(good, root + 14, Bytes(0xffff, 2)), "free space bounds");
  ExpectDamaged(WithBytes(good, root + 18, Bytes(3, 2)), "node 1 at byte 3");
  // Separators out of order (node 1's key made larger than node 2's).
  ExpectDamaged(WithBytes(good, node1 + 8, "99999999"), "out of order");
}

TEST(BrokenLmdbTest, DamagedLeafPageIsALocatedErrorNamingTheRecord) {
  const std::string good = ReadAll(DataFile(FreshDb("leaf_src_lmdb")));
  const Layout l = Inspect(good);
  const uint64_t leaf = l.leaf * l.page_size;
  const std::string where = absl::StrCat("damaged page ", l.leaf, " (leaf level ", l.depth);
  // The leaf marked a branch, and an overflow page.
  ExpectDamaged(WithBytes(good, leaf + 10, Bytes(0x01, 2)), where);
  ExpectDamaged(WithBytes(good, leaf + 10, Bytes(0x04, 2)), "not those of a leaf page");
  // Node 3's value size made huge: it would run past the page.
  const uint64_t node3 = leaf + At<uint16_t>(good, leaf + 16 + 6);
  Outcome out = WithBytes(good, node3 + 2, Bytes(0x00ff, 2));
  ExpectDamaged(out, "record node 3 (key '00000003')");
  ExpectDamaged(out, "at record 3 (after key '00000002')");
  ExpectDamaged(out, "runs past the page");
  // Node 3's key size past the page, its flags claiming a sub-database, a key out of order.
  ExpectDamaged(WithBytes(good, node3 + 6, Bytes(0xfff0, 2)), "runs past the page");
  ExpectDamaged(WithBytes(good, node3 + 4, Bytes(0x02, 2)), "not a plain record");
  ExpectDamaged(WithBytes(good, node3 + 8, "00000009"), "the key is out of order");
  // A large value whose overflow run is claimed to start past the file: the record with the
  // 64x64 datum is record 7, on the first leaf.
  const uint64_t node7 = leaf + At<uint16_t>(good, leaf + 16 + 14);
  ASSERT_EQ(At<uint16_t>(good, node7 + 4), 1) << "record 7 should be on overflow pages";
  ExpectDamaged(WithBytes(good, node7 + 8 + 8, Bytes(uint64_t{1} << 40, 8)), "overflow");
  ExpectDamaged(WithBytes(good, node7 + 8 + 8, Bytes(uint64_t{1} << 40, 8), true), "overflow");
}

TEST(BrokenLmdbTest, DamagedMetaPageIsAnError) {
  const std::string good = ReadAll(DataFile(FreshDb("meta_src_lmdb")));
  const Layout l = Inspect(good);
  ExpectDamaged(WithBytes(good, 16, Bytes(0x12345678, 4)), "not an LMDB data file");
  ExpectDamaged(WithBytes(good, l.page_size + 20, Bytes(7, 4)), "format version 7");
  ExpectDamaged(WithBytes(good, 40, Bytes(4097, 4)), "page size 4097");
  // The record count, the depth and the root of the newer meta.
  ExpectDamaged(WithBytes(good, l.meta + 88 + 32, Bytes(uint64_t{1} << 60, 8)),
                "declares 1152921504606846976 records but the tree holds 300");
  ExpectDamaged(WithBytes(good, l.meta + 88 + 6, Bytes(l.depth + 1, 2)), "not those of a");
  ExpectDamaged(WithBytes(good, l.meta + 88 + 6, Bytes(40, 2)), "depth 40");
  ExpectDamaged(WithBytes(good, l.meta + 88 + 40, Bytes(0, 8)), "root page 0");
  ExpectDamaged(WithBytes(good, l.meta + 136, Bytes(uint64_t{1} << 62, 8)), "last page");
  ExpectDamaged(WithBytes(good, l.meta + 88 + 4, Bytes(0x04, 2)), "flags 0x4");
}

// Every byte of the meta pages' fields, the root branch page's header and nodes, and the first
// leaf page's header and node area flipped in turn (all bits): each copy gives a clean error or
// reads (the flip hit a byte nothing depends on, or the record's datum bytes, which reading
// reports). Nothing aborts.
TEST(BrokenLmdbTest, SingleByteFlipsNeverCrash) {
  const std::string good = ReadAll(DataFile(FreshDb("sweep_src_lmdb")));
  const Layout l = Inspect(good);
  std::vector<uint64_t> offsets;
  for (uint64_t meta : {uint64_t{0}, l.page_size}) {
    for (uint64_t i = 16; i < 152; i += 1) offsets.push_back(meta + i);
  }
  for (uint64_t page : {l.root, l.leaf}) {
    const uint64_t start = page * l.page_size;
    const uint64_t lower = At<uint16_t>(good, start + 12), upper = At<uint16_t>(good, start + 14);
    for (uint64_t i = 0; i < lower; ++i) offsets.push_back(start + i);
    // The node area: every byte of the first 96 and a sample of the rest.
    for (uint64_t i = upper; i < l.page_size; i += (i < upper + 96 ? 1 : 61)) {
      offsets.push_back(start + i);
    }
  }
  const std::string db = "sweep_lmdb";
  FreshDb(db);
  int errors = 0;
  for (uint64_t offset : offsets) {
    std::string damaged = good;
    damaged[offset] = static_cast<char>(~damaged[offset]);
    WriteAll(DataFile(db), damaged);
    const Outcome out = OpenAndRead(db, offset % 3 == 0, /*passes=*/1);
    if (out.status.ok()) continue;
    ++errors;
    EXPECT_TRUE(Contains(out.status.message(), "source 'sweep_lmdb'")) << out.status;
    // FailedPrecondition: a flip made the older meta page, of the empty database, the newer.
    EXPECT_TRUE(out.status.code() == absl::StatusCode::kInvalidArgument ||
                out.status.code() == absl::StatusCode::kFailedPrecondition)
        << "byte " << offset << ": " << out.status;
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace kiln
