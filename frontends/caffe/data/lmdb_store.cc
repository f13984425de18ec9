// LMDB under the KvWriter/KvReader interface, laid out as Caffe lays it out: a directory holding
// data.mdb and lock.mdb, one unnamed database, keys in byte order.
#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/data/kv_store.h"
#include "frontends/caffe/data/lmdb_check.h"

namespace kiln {
namespace {

// The map starts small and doubles whenever a batch does not fit, so small test databases stay
// small and large ones never need a size guessed up front.
constexpr size_t kInitialMapSize = size_t{64} << 20;

absl::Status LmdbError(const std::string& path, const char* call, int rc) {
  const absl::StatusCode code =
      rc == ENOENT ? absl::StatusCode::kNotFound
                   : (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_VERSION_MISMATCH
                          ? absl::StatusCode::kInvalidArgument
                          : absl::StatusCode::kInternal);
  return absl::Status(code, absl::StrCat("lmdb '", path, "': ", call, ": ", mdb_strerror(rc)));
}

// liblmdb calls abort() right after this hook returns, so it cannot turn an assert into an
// error; CheckLmdbFile is what keeps damaged files away from the library. Should an assert still
// fire (the file changed after it was checked), the hook at least names the file first.
void OnLmdbAssert(MDB_env* env, const char* message) {
  const char* path = nullptr;
  if (env == nullptr || mdb_env_get_path(env, &path) != MDB_SUCCESS) path = nullptr;
  std::fprintf(stderr,
               "kiln: lmdb '%s': liblmdb found a damaged page (%s); was the database changed "
               "while it was read?\n",
               path != nullptr ? path : "?", message != nullptr ? message : "");
  std::fflush(stderr);
}

class LmdbWriter : public KvWriter {
 public:
  LmdbWriter(std::string path, MDB_env* env) : path_(std::move(path)), env_(env) {}
  ~LmdbWriter() override {
    if (env_ != nullptr) mdb_env_close(env_);
  }

  absl::Status Write(const std::vector<std::pair<std::string, std::string>>& batch) override {
    if (env_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("lmdb '", path_, "': already closed"));
    }
    while (true) {
      int rc = WriteOnce(batch);
      if (rc == MDB_SUCCESS) return absl::OkStatus();
      if (rc != MDB_MAP_FULL) return LmdbError(path_, "write", rc);
      // Nothing of the batch was kept: grow the map and write the whole batch again.
      MDB_envinfo info;
      mdb_env_info(env_, &info);
      rc = mdb_env_set_mapsize(env_, info.me_mapsize * 2);
      if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_env_set_mapsize", rc);
    }
  }

  absl::Status Close() override {
    if (env_ != nullptr) {
      const int rc = mdb_env_sync(env_, 1);
      mdb_env_close(env_);
      env_ = nullptr;
      if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_env_sync", rc);
    }
    return absl::OkStatus();
  }

 private:
  int WriteOnce(const std::vector<std::pair<std::string, std::string>>& batch) {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != MDB_SUCCESS) return rc;
    MDB_dbi dbi;
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    for (size_t i = 0; rc == MDB_SUCCESS && i < batch.size(); ++i) {
      MDB_val key{batch[i].first.size(), const_cast<char*>(batch[i].first.data())};
      MDB_val value{batch[i].second.size(), const_cast<char*>(batch[i].second.data())};
      rc = mdb_put(txn, dbi, &key, &value, 0);
    }
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn);
      return rc;
    }
    return mdb_txn_commit(txn);  // frees the transaction whatever it returns
  }

  std::string path_;
  MDB_env* env_;
};

class LmdbReader : public KvReader {
 public:
  ~LmdbReader() override {
    if (cursor_ != nullptr) mdb_cursor_close(cursor_);
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    if (env_ != nullptr) mdb_env_close(env_);
  }

  absl::Status Init(const std::string& path) {
    path_ = path;
    int rc = mdb_env_create(&env_);
    if (rc != MDB_SUCCESS) {
      env_ = nullptr;
      return LmdbError(path_, "mdb_env_create", rc);
    }
    // Before liblmdb maps the file: a truncated file would be mapped past its end (SIGBUS) and a
    // damaged page would trip an assert inside the library (abort).
    const absl::StatusOr<uint64_t> declared = CheckLmdbFile(path);
    if (!declared.ok()) return declared.status();
    mdb_env_set_assert(env_, OnLmdbAssert);
    // Map what the file holds, not the map size its meta page asks for (a damaged one asks for
    // terabytes, and mapping fails with a bare ENOMEM).
    rc = mdb_env_set_mapsize(env_, static_cast<size_t>(*declared));
    if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_env_set_mapsize", rc);
    // No lock file: readers of static training data need no reader table, and this way a
    // database on a read-only file system (or opened by several sources at once) still opens.
    rc = mdb_env_open(env_, path.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664);
    if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_env_open", rc);
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn_);
    if (rc != MDB_SUCCESS) {
      txn_ = nullptr;
      return LmdbError(path_, "mdb_txn_begin", rc);
    }
    rc = mdb_dbi_open(txn_, nullptr, 0, &dbi_);
    if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_dbi_open", rc);
    MDB_stat stat;
    rc = mdb_stat(txn_, dbi_, &stat);
    if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_stat", rc);
    count_ = static_cast<int64_t>(stat.ms_entries);
    rc = mdb_cursor_open(txn_, dbi_, &cursor_);
    if (rc != MDB_SUCCESS) {
      cursor_ = nullptr;
      return LmdbError(path_, "mdb_cursor_open", rc);
    }
    return SeekToFirst();
  }

  int64_t Count() const override { return count_; }
  absl::Status SeekToFirst() override { return Move(MDB_FIRST); }
  bool Valid() const override { return valid_; }
  absl::Status Next() override { return Move(MDB_NEXT); }
  absl::string_view key() const override {
    return absl::string_view(static_cast<const char*>(key_.mv_data), key_.mv_size);
  }
  absl::string_view value() const override {
    return absl::string_view(static_cast<const char*>(value_.mv_data), value_.mv_size);
  }

  absl::Status Get(const std::string& key, std::string* value) override {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    MDB_val v;
    const int rc = mdb_get(txn_, dbi_, &k, &v);
    if (rc == MDB_NOTFOUND) {
      return absl::NotFoundError(absl::StrCat("lmdb '", path_, "': no key '", key, "'"));
    }
    if (rc != MDB_SUCCESS) return LmdbError(path_, "mdb_get", rc);
    value->assign(static_cast<const char*>(v.mv_data), v.mv_size);
    return absl::OkStatus();
  }

 private:
  absl::Status Move(MDB_cursor_op op) {
    const int rc = mdb_cursor_get(cursor_, &key_, &value_, op);
    valid_ = rc == MDB_SUCCESS;
    if (rc == MDB_SUCCESS || rc == MDB_NOTFOUND) return absl::OkStatus();
    return LmdbError(path_, "mdb_cursor_get", rc);
  }

  std::string path_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{0, nullptr};
  MDB_val value_{0, nullptr};
  bool valid_ = false;
  int64_t count_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvWriter>> CreateLmdbWriter(const std::string& path) {
  if (mkdir(path.c_str(), 0775) != 0) {
    return absl::InternalError(
        absl::StrCat("lmdb '", path, "': cannot create the directory: ", std::strerror(errno)));
  }
  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc != MDB_SUCCESS) return LmdbError(path, "mdb_env_create", rc);
  auto writer = std::make_unique<LmdbWriter>(path, env);
  rc = mdb_env_set_mapsize(env, kInitialMapSize);
  if (rc != MDB_SUCCESS) return LmdbError(path, "mdb_env_set_mapsize", rc);
  rc = mdb_env_open(env, path.c_str(), 0, 0664);
  if (rc != MDB_SUCCESS) return LmdbError(path, "mdb_env_open", rc);
  return std::unique_ptr<KvWriter>(std::move(writer));
}

absl::StatusOr<std::unique_ptr<KvReader>> OpenLmdbReader(const std::string& path) {
  auto reader = std::make_unique<LmdbReader>();
  absl::Status status = reader->Init(path);
  if (!status.ok()) return status;
  return std::unique_ptr<KvReader>(std::move(reader));
}

}  // namespace kiln
