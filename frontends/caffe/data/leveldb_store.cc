// LevelDB under the KvWriter/KvReader interface: a directory of tables, keys in byte order (the
// default comparator, as Caffe uses). Reads check everything LevelDB can: the database is opened
// with paranoid_checks and every block read verifies its checksum, so a damaged table is a
// Corruption error (InvalidArgument here) instead of records silently skipped or garbage read.
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "frontends/caffe/data/kv_store.h"

namespace kiln {
namespace {

absl::Status LevelDbError(const std::string& path, absl::string_view call,
                          const leveldb::Status& s) {
  const absl::StatusCode code = s.IsNotFound()     ? absl::StatusCode::kNotFound
                                : s.IsCorruption() ? absl::StatusCode::kInvalidArgument
                                                   : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("leveldb '", path, "': ", call, ": ", s.ToString()));
}

class LevelDbWriter : public KvWriter {
 public:
  LevelDbWriter(std::string path, leveldb::DB* db) : path_(std::move(path)), db_(db) {}

  absl::Status Write(const std::vector<std::pair<std::string, std::string>>& batch) override {
    if (db_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("leveldb '", path_, "': already closed"));
    }
    leveldb::WriteBatch writes;
    for (const auto& [key, value] : batch) writes.Put(key, value);
    const leveldb::Status s = db_->Write(leveldb::WriteOptions(), &writes);
    return s.ok() ? absl::OkStatus() : LevelDbError(path_, "Write", s);
  }

  absl::Status Close() override {
    db_.reset();  // LevelDB's log already holds every batch written
    return absl::OkStatus();
  }

 private:
  std::string path_;
  std::unique_ptr<leveldb::DB> db_;
};

class LevelDbReader : public KvReader {
 public:
  absl::Status Init(const std::string& path) {
    path_ = path;
    leveldb::Options options;
    options.create_if_missing = false;
    options.max_open_files = 100;
    options.paranoid_checks = true;
    leveldb::DB* db = nullptr;
    const leveldb::Status s = leveldb::DB::Open(options, path, &db);
    if (!s.ok()) return LevelDbError(path, "open", s);
    db_.reset(db);
    // LevelDB keeps no record count, so count once: a pass over the keys.
    iter_.reset(db_->NewIterator(Checked()));
    std::string last;
    for (iter_->SeekToFirst(); iter_->Valid() && iter_->status().ok(); iter_->Next()) {
      ++count_;
      last.assign(iter_->key().data(), iter_->key().size());
    }
    if (!iter_->status().ok()) {
      // A damaged block: LevelDB's message names the table file; add where in the records.
      return LevelDbError(path_,
                          count_ == 0 ? std::string("reading record 0")
                                      : absl::StrCat("reading record ", count_, " (after key '",
                                                     absl::CHexEscape(last), "')"),
                          iter_->status());
    }
    return SeekToFirst();
  }

  ~LevelDbReader() override { iter_.reset(); }  // before the database it reads

  int64_t Count() const override { return count_; }
  absl::Status SeekToFirst() override {
    iter_->SeekToFirst();
    return IterStatus();
  }
  bool Valid() const override { return iter_->Valid(); }
  absl::Status Next() override {
    iter_->Next();
    return IterStatus();
  }
  absl::string_view key() const override {
    const leveldb::Slice k = iter_->key();
    return absl::string_view(k.data(), k.size());
  }
  absl::string_view value() const override {
    const leveldb::Slice v = iter_->value();
    return absl::string_view(v.data(), v.size());
  }
  absl::Status Get(const std::string& key, std::string* value) override {
    const leveldb::Status s = db_->Get(Checked(), key, value);
    if (s.IsNotFound()) {
      return absl::NotFoundError(absl::StrCat("leveldb '", path_, "': no key '", key, "'"));
    }
    return s.ok() ? absl::OkStatus() : LevelDbError(path_, "Get", s);
  }

 private:
  static leveldb::ReadOptions Checked() {
    leveldb::ReadOptions options;
    options.verify_checksums = true;
    return options;
  }

  absl::Status IterStatus() {
    return iter_->status().ok() ? absl::OkStatus()
                                : LevelDbError(path_, "iterate", iter_->status());
  }

  std::string path_;
  std::unique_ptr<leveldb::DB> db_;
  std::unique_ptr<leveldb::Iterator> iter_;
  int64_t count_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvWriter>> CreateLevelDbWriter(const std::string& path) {
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.write_buffer_size = 64 << 20;  // fewer, larger tables for bulk loading
  leveldb::DB* db = nullptr;
  const leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) return LevelDbError(path, "create", s);
  return std::unique_ptr<KvWriter>(std::make_unique<LevelDbWriter>(path, db));
}

absl::StatusOr<std::unique_ptr<KvReader>> OpenLevelDbReader(const std::string& path) {
  auto reader = std::make_unique<LevelDbReader>();
  absl::Status status = reader->Init(path);
  if (!status.ok()) return status;
  return std::unique_ptr<KvReader>(std::move(reader));
}

}  // namespace kiln
