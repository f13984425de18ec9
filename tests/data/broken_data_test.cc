// Broken training data through the user-facing paths: a damaged LevelDB (its log, its table),
// Datum records whose sizes lie, and the damaged LMDBs and truncated JPEG of the other tests
// through `kiln train` itself (TrainCommand, as tests/tools/kiln_train_cli_test.cc calls it). Each
// gives a clear error naming the file and the record or list line; none aborts or crashes.
#include <climits>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tests/util/image_files.h"
#include "tools/train_command.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string BaseDir() {
  const std::string any = ScratchFile("x");
  return any.substr(0, any.rfind('/'));
}

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

caffe::Datum Record(int i) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(8);
  d.set_width(8);
  d.set_data(std::string(64, static_cast<char>(i)));
  d.set_label(i % 2);
  return d;
}

// A database of `n` records in the scratch folder, record `odd` (if any) replaced by `liar`.
std::string MakeDb(const std::string& name, DbBackend backend, int n, int odd = -1,
                   const caffe::Datum& liar = caffe::Datum()) {
  DatumWriterOptions options;
  options.overwrite = true;
  auto writer = DatumWriter::Open(ScratchFile(name), backend, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE((*writer)->Put(DatumKey(i), i == odd ? liar : Record(i)).ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return name;
}

std::string DataLayerText(const std::string& source, DbBackend backend, int batch) {
  return absl::StrCat("name: 'train' type: 'Data' top: 'data' top: 'label' data_param { source: '",
                      source, "' backend: ", backend == DbBackend::kLmdb ? "LMDB" : "LEVELDB",
                      " batch_size: ", batch, " }");
}

// Opens a data layer and reads `batches` batches; the first error, or OK.
absl::Status OpenAndRead(const std::string& layer_text, int batches, bool shuffle = false) {
  caffe::LayerParameter layer;
  EXPECT_TRUE(ParseTextMessage(layer_text, "layer", layer).ok());
  auto source = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), 1, shuffle);
  if (!source.ok()) return source.status();
  Batch batch;
  for (int i = 0; i < batches; ++i) {
    absl::Status status = (*source)->Next(&batch);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void Flip(const std::string& path, uint64_t offset) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_LT(offset, bytes->size()) << path;
  (*bytes)[offset] = static_cast<char>(~(*bytes)[offset]);
  ASSERT_TRUE(WriteFileBytes(path, *bytes).ok());
}

std::vector<std::string> FilesEndingIn(const std::string& dir, const std::string& ext) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) files.push_back(e.path().string());
  }
  return files;
}

// ---------------------------------------------------------------------------------------------
// LevelDB

TEST(BrokenLevelDbTest, DamagedLogIsAnErrorNotSilentlyDroppedRecords) {
  const std::string db = MakeDb("bad_log_leveldb", DbBackend::kLevelDb, 200);
  const std::vector<std::string> logs = FilesEndingIn(ScratchFile(db), ".log");
  ASSERT_EQ(logs.size(), 1u);
  Flip(logs[0], fs::file_size(logs[0]) / 2);
  const absl::Status s = OpenAndRead(DataLayerText(db, DbBackend::kLevelDb, 16), 30);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s.message(), "data layer 'train': source 'bad_log_leveldb'")) << s;
  EXPECT_TRUE(Contains(s.message(), ScratchFile(db))) << s;
  EXPECT_TRUE(Contains(s.message(), "Corruption")) << s;
}

// A LevelDB whose records are in a table file (opening it once moves the log into a table).
std::string TableDb(const std::string& name) {
  MakeDb(name, DbBackend::kLevelDb, 200);
  EXPECT_TRUE(DatumReader::Open(ScratchFile(name), DbBackend::kLevelDb).ok());
  return name;
}

TEST(BrokenLevelDbTest, DamagedTableIsALocatedError) {
  {
    const std::string db = TableDb("good_table_leveldb");
    EXPECT_TRUE(OpenAndRead(DataLayerText(db, DbBackend::kLevelDb, 16), 30).ok());
  }
  // A byte in the first data block, in the middle of the data, and in the table's magic number.
  for (int where = 0; where < 3; ++where) {
    SCOPED_TRACE(where);
    const std::string db = TableDb("bad_table_leveldb");
    const std::vector<std::string> tables = FilesEndingIn(ScratchFile(db), ".ldb");
    ASSERT_EQ(tables.size(), 1u);
    const uint64_t size = fs::file_size(tables[0]);
    Flip(tables[0], where == 0 ? 40 : where == 1 ? size / 2 : size - 4);
    for (bool shuffle : {false, true}) {
      const absl::Status s = OpenAndRead(DataLayerText(db, DbBackend::kLevelDb, 16), 30, shuffle);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_TRUE(Contains(s.message(), "source 'bad_table_leveldb'")) << s;
      EXPECT_TRUE(Contains(s.message(), "Corruption")) << s;
      EXPECT_TRUE(Contains(s.message(), tables[0]) || Contains(s.message(), ScratchFile(db))) << s;
      if (where == 1) {
        EXPECT_TRUE(Contains(s.message(), "reading record ")) << s;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Datum records whose sizes lie

caffe::Datum Liar(int64_t c, int64_t h, int64_t w, int bytes, int floats = 0) {
  caffe::Datum d;
  d.set_channels(static_cast<int32_t>(c));
  d.set_height(static_cast<int32_t>(h));
  d.set_width(static_cast<int32_t>(w));
  d.set_data(std::string(bytes, 'x'));
  for (int i = 0; i < floats; ++i) d.add_float_data(1.0f);
  return d;
}

struct LieCase {
  caffe::Datum datum;
  std::string message;
};

TEST(BrokenDatumTest, SizesThatLieAreLocatedErrors) {
  const std::vector<LieCase> cases = {
      {Liar(INT_MAX, INT_MAX, INT_MAX, 64), "2147483647x2147483647x2147483647 overflows"},
      {Liar(INT_MAX, INT_MAX, 2, 64), "needs 9223372028264841218 values, its data has 64"},
      {Liar(1, 8, 8, 10), "datum 1x8x8 needs 64 values, its data has 10"},
      {Liar(1, 8, 8, 0, 63), "needs 64 values, its float_data has 63"},
      {Liar(1, 8, 8, 0), "its float_data has 0"},
      {Liar(-1, 8, 8, 64), "datum size -1x8x8 is not positive"},
      {Liar(1, 0, 8, 64), "is not positive"},
  };
  for (DbBackend backend : {DbBackend::kLmdb, DbBackend::kLevelDb}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      for (int odd : {0, 37}) {
        SCOPED_TRACE(absl::StrCat(DbBackendName(backend), " case ", i, " at record ", odd));
        const std::string db =
            MakeDb(absl::StrCat("liar_", DbBackendName(backend)), backend, 64, odd, cases[i].datum);
        for (bool shuffle : {false, true}) {
          const absl::Status s = OpenAndRead(DataLayerText(db, backend, 8), 16, shuffle);
          EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
          EXPECT_TRUE(Contains(s.message(), ScratchFile(db))) << s;
          EXPECT_TRUE(Contains(s.message(), absl::StrCat("'", DatumKey(odd), "'"))) << s;
          EXPECT_TRUE(Contains(s.message(), cases[i].message)) << s;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Through `kiln train`

struct Result {
  int rc = -1;
  std::string out, err;
};

Result Train(const std::string& solver) {
  std::vector<std::string> args = {"kiln", "train", "--solver", solver, "--device", "cpu"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Result r;
  r.rc = TrainCommand(static_cast<int>(argv.size()), argv.data());
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

// A solver training a tiny net whose data layer is `data_layer`, for 6 iterations.
std::string Solver(const std::string& name, const std::string& data_layer) {
  const std::string net = absl::StrCat("name: 'broken' layer { ", data_layer, R"pb(}
                                                                                   layer {
      name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
      inner_product_param { num_output: 2 weight_filler { type: "xavier" } }
    }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )pb");
  EXPECT_TRUE(WriteFileBytes(ScratchFile(name + "_net.prototxt"), net).ok());
  const std::string solver = ScratchFile(name + "_solver.prototxt");
  EXPECT_TRUE(
      WriteFileBytes(solver, absl::StrCat("net: \"", name,
                                          "_net.prototxt\"\nbase_lr: 0.01\n"
                                          "lr_policy: \"fixed\"\nmax_iter: 6\n"
                                          "snapshot_after_train: false\nsnapshot_prefix: \"",
                                          ScratchFile(name), "\"\n"))
          .ok());
  return solver;
}

void ExpectTrainFails(const std::string& solver, const std::vector<std::string>& parts) {
  const Result r = Train(solver);
  EXPECT_NE(r.rc, 0) << r.out << r.err;
  for (const std::string& part : parts) {
    EXPECT_TRUE(Contains(r.err, part)) << "missing '" << part << "' in:\n" << r.out << r.err;
  }
}

TEST(BrokenDataTrainTest, TruncatedLmdbFailsCleanly) {
  const std::string db = MakeDb("train_trunc_lmdb", DbBackend::kLmdb, 400);
  const std::string file = ScratchFile(db + "/data.mdb");
  {
    const Result good = Train(Solver("train_good", DataLayerText(db, DbBackend::kLmdb, 16)));
    ASSERT_EQ(good.rc, 0) << good.out << good.err;
  }
  absl::StatusOr<std::string> bytes = ReadFileBytes(file);
  ASSERT_TRUE(bytes.ok());
  for (size_t cut : {size_t{10}, bytes->size() / 2, bytes->size() - 1}) {
    SCOPED_TRACE(cut);
    ASSERT_TRUE(WriteFileBytes(file, bytes->substr(0, cut)).ok());
    ExpectTrainFails(Solver("train_trunc", DataLayerText(db, DbBackend::kLmdb, 16)),
                     {file, "truncated", absl::StrCat(cut, " bytes")});
  }
}

TEST(BrokenDataTrainTest, DamagedLmdbPageFailsCleanly) {
  const std::string db = MakeDb("train_page_lmdb", DbBackend::kLmdb, 400);
  const std::string file = ScratchFile(db + "/data.mdb");
  absl::StatusOr<std::string> bytes = ReadFileBytes(file);
  ASSERT_TRUE(bytes.ok());
  // The flags of every page after the meta pages turned to a branch's: the leaves among them,
  // which liblmdb's cursor asserted on ("IS_LEAF(mp)").
  std::string damaged = *bytes;
  const uint32_t page = 4096;
  ASSERT_EQ(bytes->size() % page, 0u);
  for (size_t p = 2 * page; p < damaged.size(); p += page) damaged[p + 10] = 0x01;
  ASSERT_TRUE(WriteFileBytes(file, damaged).ok());
  ExpectTrainFails(Solver("train_page", DataLayerText(db, DbBackend::kLmdb, 16)),
                   {file, "damaged page"});
}

TEST(BrokenDataTrainTest, DamagedLevelDbFailsCleanly) {
  const std::string db = TableDb("train_bad_leveldb");
  const std::vector<std::string> tables = FilesEndingIn(ScratchFile(db), ".ldb");
  ASSERT_EQ(tables.size(), 1u);
  Flip(tables[0], fs::file_size(tables[0]) / 2);
  ExpectTrainFails(Solver("train_leveldb", DataLayerText(db, DbBackend::kLevelDb, 16)),
                   {ScratchFile(db) + "': reading record ", "Corruption: block checksum mismatch"});
}

TEST(BrokenDataTrainTest, LyingDatumFailsCleanly) {
  const std::string db =
      MakeDb("train_liar_lmdb", DbBackend::kLmdb, 64, 40, Liar(INT_MAX, INT_MAX, INT_MAX, 64));
  ExpectTrainFails(Solver("train_liar", DataLayerText(db, DbBackend::kLmdb, 16)),
                   {ScratchFile(db), "'00000040'", "overflows"});
}

TEST(BrokenDataTrainTest, TruncatedJpegInAnImageListFailsCleanly) {
  fs::create_directories(ScratchFile("train_images"));
  std::string list;
  for (int i = 0; i < 8; ++i) {
    const std::string name = absl::StrCat("img", i, ".jpg");
    std::string jpeg = EncodeJpeg(SmoothImage(8, 8, 3, i));
    if (i == 5) jpeg = jpeg.substr(0, jpeg.size() * 2 / 3);
    ASSERT_TRUE(WriteBytes(ScratchFile("train_images/" + name), jpeg));
    absl::StrAppend(&list, name, " ", i % 2, "\n");
  }
  ASSERT_TRUE(WriteBytes(ScratchFile("train_images.txt"), list));
  const std::string layer =
      "name: 'photos' type: 'ImageData' top: 'data' top: 'label' image_data_param { source: "
      "'train_images.txt' root_folder: 'train_images' batch_size: 2 }";
  ExpectTrainFails(Solver("train_jpeg", layer),
                   {"data layer 'photos'", "train_images.txt': list line 6: ",
                    ScratchFile("train_images/img5.jpg"), "Premature end of JPEG file"});
}

}  // namespace
}  // namespace kiln
