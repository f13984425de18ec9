// LMDB and LevelDB Datum databases: write/read round trips, key order, wrap-around, overwrite.
#include "frontends/caffe/data/datum_db.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

caffe::Datum MakeDatum(int label) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(2);
  d.set_width(2);
  d.set_data(std::string{static_cast<char>(label), 1, 2, 3});
  d.set_label(label);
  return d;
}

class DatumDbTest : public ::testing::TestWithParam<DbBackend> {
 protected:
  std::string Path(const std::string& name) {
    return ScratchFile(absl::StrCat(name, "_", DbBackendName(GetParam())));
  }
  void WriteRecords(const std::string& path, int n, DatumWriterOptions options = {}) {
    auto writer = DatumWriter::Open(path, GetParam(), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    // Written out of order: readers must see key order.
    for (int i = n - 1; i >= 0; --i) {
      ASSERT_TRUE((*writer)->Put(DatumKey(i), MakeDatum(i)).ok());
    }
    EXPECT_EQ((*writer)->count(), n);
    ASSERT_TRUE((*writer)->Close().ok());
  }
};

TEST(DatumKeyTest, EightDigits) {
  EXPECT_EQ(DatumKey(0), "00000000");
  EXPECT_EQ(DatumKey(1234), "00001234");
  EXPECT_EQ(DatumKey(123456789), "123456789");
  EXPECT_EQ(*ParseDbBackend("lmdb"), DbBackend::kLmdb);
  EXPECT_EQ(*ParseDbBackend("leveldb"), DbBackend::kLevelDb);
  EXPECT_FALSE(ParseDbBackend("hdf5").ok());
  EXPECT_EQ(DbBackendFromCaffe(caffe::DataParameter::LMDB), DbBackend::kLmdb);
  EXPECT_EQ(DbBackendFromCaffe(caffe::DataParameter().backend()), DbBackend::kLevelDb);
}

TEST_P(DatumDbTest, RoundTripInKeyOrderWithWrapAround) {
  const std::string path = Path("round");
  // A batch size that does not divide the count: Close must commit the remainder.
  DatumWriterOptions options;
  options.batch_size = 3;
  WriteRecords(path, 7, options);
  auto reader = DatumReader::Open(path, GetParam());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Count(), 7);
  caffe::Datum d;
  std::string key;
  for (int i = 0; i < 16; ++i) {  // more than two passes
    EXPECT_EQ((*reader)->position(), i % 7);
    ASSERT_TRUE((*reader)->Read(&key, &d).ok());
    EXPECT_EQ(key, DatumKey(i % 7));
    EXPECT_EQ(d.label(), i % 7);
    EXPECT_EQ(d.data(), MakeDatum(i % 7).data());
  }
  ASSERT_TRUE((*reader)->Skip(12).ok());  // at 2, +12 = 14 -> 0
  ASSERT_TRUE((*reader)->Read(&key, &d).ok());
  EXPECT_EQ(key, DatumKey(0));
  auto keys = (*reader)->Keys();
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 7u);
  EXPECT_EQ((*keys)[6], DatumKey(6));
  EXPECT_EQ((*reader)->position(), 1);  // Keys does not move the cursor
  ASSERT_TRUE((*reader)->Get(DatumKey(5), &d).ok());
  EXPECT_EQ(d.label(), 5);
  EXPECT_EQ((*reader)->Get("nope", &d).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*reader)->Rewind().ok());
  EXPECT_EQ((*reader)->position(), 0);
}

TEST_P(DatumDbTest, RefusesToOverwriteUnlessAsked) {
  const std::string path = Path("overwrite");
  WriteRecords(path, 3);
  auto again = DatumWriter::Open(path, GetParam());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("overwrite"), std::string::npos);
  DatumWriterOptions options;
  options.overwrite = true;
  WriteRecords(path, 2, options);
  auto reader = DatumReader::Open(path, GetParam());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Count(), 2);

  // Overwrite never deletes something that is not a database of the backend.
  const std::string folder = Path("not_a_db");
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/precious.txt") << "keep me";
  auto refused = DatumWriter::Open(folder, GetParam(), options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(folder + "/precious.txt"));
}

TEST_P(DatumDbTest, ReaderErrors) {
  EXPECT_EQ(DatumReader::Open(Path("missing"), GetParam()).status().code(),
            absl::StatusCode::kNotFound);
  const std::string empty = Path("empty");
  {
    auto writer = DatumWriter::Open(empty, GetParam());
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Close().ok());
    EXPECT_EQ((*writer)->Put("x", MakeDatum(0)).code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(DatumReader::Open(empty, GetParam()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A record that is not a Datum is reported with its key.
  const std::string bad = Path("bad");
  {
    auto writer = DatumWriter::Open(bad, GetParam());
    ASSERT_TRUE(writer.ok());
    caffe::Datum d = MakeDatum(1);
    ASSERT_TRUE((*writer)->Put("a", d).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto reader = DatumReader::Open(bad, GetParam());
  ASSERT_TRUE(reader.ok());
  caffe::Datum d;
  EXPECT_TRUE((*reader)->Read(nullptr, &d).ok());
  EXPECT_TRUE(ParseDatum("\xff\xff\xff", "record 'z'", &d).message().find("record 'z'") !=
              std::string::npos);
}

TEST(DatumDbCrossTest, OtherBackendIsNotADatabase) {
  const std::string path = ScratchFile("cross_lmdb");
  auto writer = DatumWriter::Open(path, DbBackend::kLmdb);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Put(DatumKey(0), MakeDatum(0)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto reader = DatumReader::Open(path, DbBackend::kLevelDb);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("not a leveldb database"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, DatumDbTest,
                         ::testing::Values(DbBackend::kLmdb, DbBackend::kLevelDb),
                         [](const ::testing::TestParamInfo<DbBackend>& info) {
                           return std::string(DbBackendName(info.param));
                         });

}  // namespace
}  // namespace kiln
