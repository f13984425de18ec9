#include "frontends/caffe/data/datum_db.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/checked_int.h"
#include "base/status_macros.h"
#include "frontends/caffe/data/kv_store.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The file every database of the backend has, so that overwrite removes only databases.
const char* MarkerFile(DbBackend backend) {
  return backend == DbBackend::kLmdb ? "data.mdb" : "CURRENT";
}

absl::Status PrepareOutput(const std::string& path, DbBackend backend, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return absl::OkStatus();
  const std::string where = absl::StrCat(DbBackendName(backend), " '", path, "'");
  if (!overwrite) {
    return absl::AlreadyExistsError(
        absl::StrCat(where, ": already exists (pass overwrite to replace it)"));
  }
  if (!fs::is_directory(fs::symlink_status(path, ec)) ||
      !fs::exists(fs::path(path) / MarkerFile(backend), ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": exists but is not a ", DbBackendName(backend), " database (no ",
                     MarkerFile(backend), "); refusing to delete it"));
  }
  fs::remove_all(path, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(where, ": cannot remove it: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DbBackend> ParseDbBackend(absl::string_view name) {
  if (name == "lmdb") return DbBackend::kLmdb;
  if (name == "leveldb") return DbBackend::kLevelDb;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown database backend '", name, "' (lmdb or leveldb)"));
}

absl::string_view DbBackendName(DbBackend backend) {
  return backend == DbBackend::kLmdb ? "lmdb" : "leveldb";
}

DbBackend DbBackendFromCaffe(caffe::DataParameter::DB backend) {
  return backend == caffe::DataParameter::LMDB ? DbBackend::kLmdb : DbBackend::kLevelDb;
}

std::string DatumKey(int64_t index) {
  char key[32];
  std::snprintf(key, sizeof(key), "%08lld", static_cast<long long>(index));
  return key;
}

absl::Status ParseDatum(absl::string_view bytes, absl::string_view where, caffe::Datum* datum) {
  if (!datum->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a caffe.Datum (", bytes.size(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckDatumSizes(const caffe::Datum& datum, absl::string_view where) {
  if (datum.encoded()) return absl::OkStatus();
  const int64_t c = datum.channels(), h = datum.height(), w = datum.width();
  const std::string sizes = absl::StrCat(c, "x", h, "x", w);
  if (c < 1 || h < 1 || w < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": datum size ", sizes, " is not positive"));
  }
  std::optional<int64_t> count = CheckedMul(c, h);
  if (count) count = CheckedMul(*count, w);
  if (!count) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": datum size ", sizes, " overflows a 64-bit count"));
  }
  const bool bytes = !datum.data().empty();
  const int64_t have = bytes ? static_cast<int64_t>(datum.data().size()) : datum.float_data_size();
  if (have != *count) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": datum ", sizes, " needs ", *count,
                                                   " values, its ", bytes ? "data" : "float_data",
                                                   " has ", have));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// DatumWriter

DatumWriter::DatumWriter(std::string path, std::unique_ptr<KvWriter> store, int batch_size)
    : path_(std::move(path)), store_(std::move(store)), batch_size_(batch_size) {}

DatumWriter::~DatumWriter() = default;

absl::StatusOr<std::unique_ptr<DatumWriter>> DatumWriter::Open(const std::string& path,
                                                               DbBackend backend,
                                                               const DatumWriterOptions& options) {
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("datum writer: batch_size ", options.batch_size, " must be positive"));
  }
  KILN_RETURN_IF_ERROR(PrepareOutput(path, backend, options.overwrite));
  absl::StatusOr<std::unique_ptr<KvWriter>> store =
      backend == DbBackend::kLmdb ? CreateLmdbWriter(path) : CreateLevelDbWriter(path);
  if (!store.ok()) return store.status();
  return std::unique_ptr<DatumWriter>(
      new DatumWriter(path, std::move(store).value(), options.batch_size));
}

absl::Status DatumWriter::Put(const std::string& key, const caffe::Datum& datum) {
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("'", path_, "': Put after Close"));
  }
  std::string value;
  if (!datum.SerializeToString(&value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path_, "': record '", key, "' cannot be serialized"));
  }
  pending_.emplace_back(key, std::move(value));
  ++count_;
  if (static_cast<int>(pending_.size()) >= batch_size_) return Commit();
  return absl::OkStatus();
}

absl::Status DatumWriter::Commit() {
  if (pending_.empty()) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(store_->Write(pending_));
  pending_.clear();
  return absl::OkStatus();
}

absl::Status DatumWriter::Close() {
  if (store_ == nullptr) return absl::OkStatus();
  absl::Status status = Commit();
  const absl::Status closed = store_->Close();
  store_.reset();
  return status.ok() ? closed : status;
}

// ---------------------------------------------------------------------------------------------
// DatumReader

DatumReader::DatumReader(std::string path, std::unique_ptr<KvReader> store)
    : path_(std::move(path)), store_(std::move(store)), count_(store_->Count()) {}

DatumReader::~DatumReader() = default;

absl::StatusOr<std::unique_ptr<DatumReader>> DatumReader::Open(const std::string& path,
                                                               DbBackend backend) {
  const std::string where = absl::StrCat(DbBackendName(backend), " '", path, "'");
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(where, ": no such database"));
  }
  if (!fs::exists(fs::path(path) / MarkerFile(backend), ec)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a ", DbBackendName(backend),
                                                   " database (no ", MarkerFile(backend), ")"));
  }
  absl::StatusOr<std::unique_ptr<KvReader>> store =
      backend == DbBackend::kLmdb ? OpenLmdbReader(path) : OpenLevelDbReader(path);
  if (!store.ok()) return store.status();
  if ((*store)->Count() == 0 || !(*store)->Valid()) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": the database is empty"));
  }
  return std::unique_ptr<DatumReader>(new DatumReader(path, std::move(store).value()));
}

absl::Status DatumReader::Advance() {
  // The key is taken before the cursor moves: after a failed move there may be none to ask for.
  const std::string key(store_->key());
  absl::Status moved = store_->Next();
  if (!moved.ok()) {
    return Annotate(moved, absl::StrCat("moving past record ", position_, " (key '",
                                        absl::CHexEscape(key), "')"));
  }
  ++position_;
  if (!store_->Valid()) {
    position_ = 0;
    KILN_RETURN_IF_ERROR(Annotate(store_->SeekToFirst(), "going back to record 0"));
    if (!store_->Valid()) {
      return absl::InternalError(absl::StrCat("'", path_, "': the database became empty"));
    }
  }
  return absl::OkStatus();
}

absl::Status DatumReader::ReadRaw(std::string* key, std::string* value) {
  if (key != nullptr) key->assign(store_->key().data(), store_->key().size());
  value->assign(store_->value().data(), store_->value().size());
  return Advance();
}

absl::Status DatumReader::Read(std::string* key, caffe::Datum* datum) {
  const absl::string_view k = store_->key();
  const std::string where = absl::StrCat("'", path_, "': record ", position_, " (key '", k, "')");
  KILN_RETURN_IF_ERROR(ParseDatum(store_->value(), where, datum));
  KILN_RETURN_IF_ERROR(CheckDatumSizes(*datum, where));
  if (key != nullptr) key->assign(k.data(), k.size());
  return Advance();
}

absl::Status DatumReader::Skip(int64_t n) {
  n %= count_;
  for (int64_t i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(Advance());
  return absl::OkStatus();
}

absl::Status DatumReader::Rewind() {
  position_ = 0;
  return store_->SeekToFirst();
}

absl::StatusOr<std::vector<std::string>> DatumReader::Keys() {
  const int64_t at = position_;
  KILN_RETURN_IF_ERROR(Rewind());
  std::vector<std::string> keys;
  keys.reserve(count_);
  for (int64_t i = 0; i < count_; ++i) {
    keys.emplace_back(store_->key());
    KILN_RETURN_IF_ERROR(Advance());
  }
  KILN_RETURN_IF_ERROR(Skip(at));
  return keys;
}

absl::Status DatumReader::Get(const std::string& key, caffe::Datum* datum) {
  KILN_RETURN_IF_ERROR(store_->Get(key, &scratch_));
  const std::string where = absl::StrCat("'", path_, "': record '", key, "'");
  KILN_RETURN_IF_ERROR(ParseDatum(scratch_, where, datum));
  return CheckDatumSizes(*datum, where);
}

}  // namespace kiln
