// Caffe's databases of caffe::Datum records (what convert_mnist_data and convert_imageset write
// and the Data layer reads): LMDB or LevelDB, keys ordered bytewise, each value one serialized
// Datum.
#ifndef KILN_FRONTENDS_CAFFE_DATA_DATUM_DB_H_
#define KILN_FRONTENDS_CAFFE_DATA_DATUM_DB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

class KvReader;
class KvWriter;

// Which store a database lives in; the same two Caffe's DataParameter.backend names.
enum class DbBackend { kLmdb, kLevelDb };

// "lmdb" or "leveldb" (the names `kiln convert --backend` takes); InvalidArgument otherwise.
absl::StatusOr<DbBackend> ParseDbBackend(absl::string_view name);
absl::string_view DbBackendName(DbBackend backend);
// DataParameter.backend as a DbBackend (Caffe's default, LEVELDB, when the field is unset).
DbBackend DbBackendFromCaffe(caffe::DataParameter::DB backend);

// The key Caffe's convert tools give record `index`: the index as 8 zero-padded digits, so that
// bytewise key order is insertion order for up to 10^8 records.
std::string DatumKey(int64_t index);

struct DatumWriterOptions {
  // Replace an existing database at the path. Off by default so that a typo in an output path
  // cannot destroy a data set; even when on, only a directory that holds a database of the chosen
  // backend is removed, never an arbitrary folder.
  bool overwrite = false;
  // Records per transaction, as Caffe's convert tools commit every 1000: large enough to amortize
  // the commit, small enough that the pending batch stays in memory comfortably.
  int batch_size = 1000;
};

// Writes a new database. Records are buffered and committed batch_size at a time; Close()
// commits the rest. Keys must be unique; with DatumKey(i) keys, readers see records in i order.
class DatumWriter {
 public:
  // Creates the database directory `path`. AlreadyExists when something is there and
  // options.overwrite is false; FailedPrecondition when overwrite is on but the path is not a
  // database of `backend`.
  static absl::StatusOr<std::unique_ptr<DatumWriter>> Open(const std::string& path,
                                                           DbBackend backend,
                                                           const DatumWriterOptions& options = {});
  // Records not yet committed when the writer is destroyed without Close() are dropped: a run
  // that failed half way leaves a database that visibly ends early rather than a torn batch.
  ~DatumWriter();

  absl::Status Put(const std::string& key, const caffe::Datum& datum);
  // Commits the pending batch and closes the database. Put after Close is FailedPrecondition.
  absl::Status Close();
  // Records Put so far (committed or pending).
  int64_t count() const { return count_; }

 private:
  DatumWriter(std::string path, std::unique_ptr<KvWriter> store, int batch_size);
  absl::Status Commit();

  std::string path_;
  std::unique_ptr<KvWriter> store_;
  int batch_size_;
  std::vector<std::pair<std::string, std::string>> pending_;
  int64_t count_ = 0;
};

// Reads a database through a cursor in key order that wraps around to the first record at the
// end, as Caffe's Data layer cycles through its source for as many epochs as training runs.
// Not thread-safe: one thread uses a reader at a time (DatumBatchSource's prefetch thread owns
// one).
class DatumReader {
 public:
  // Opens an existing database read-only, the cursor on the first record. NotFound when there is
  // no database at `path`; FailedPrecondition when it is empty (a Data layer cannot cycle through
  // nothing).
  static absl::StatusOr<std::unique_ptr<DatumReader>> Open(const std::string& path,
                                                           DbBackend backend);
  ~DatumReader();

  // Records in the database.
  int64_t Count() const { return count_; }
  // Position of the cursor: 0 for the first record in key order, up to Count() - 1.
  int64_t position() const { return position_; }

  // Reads the record under the cursor and advances it (from the last record to the first).
  // InvalidArgument naming the file and the key when the value is not a Datum or its sizes do
  // not add up (CheckDatumSizes). `key` may be null.
  absl::Status Read(std::string* key, caffe::Datum* datum);
  // The same without parsing: the serialized Datum.
  absl::Status ReadRaw(std::string* key, std::string* value);
  // Advances the cursor by `n` records (n >= 0), wrapping around; reads no values.
  absl::Status Skip(int64_t n);
  // Moves the cursor back to the first record.
  absl::Status Rewind();

  // Every key in order (a separate pass; the cursor does not move). Shuffled reading uses it to
  // draw records in a permuted order through Get.
  absl::StatusOr<std::vector<std::string>> Keys();
  // Random access by key; NotFound when absent; checked as Read checks.
  absl::Status Get(const std::string& key, caffe::Datum* datum);

  const std::string& path() const { return path_; }

 private:
  DatumReader(std::string path, std::unique_ptr<KvReader> store);
  absl::Status Advance();

  std::string path_;
  std::unique_ptr<KvReader> store_;
  int64_t count_ = 0;
  int64_t position_ = 0;
  std::string scratch_;
};

// Parses a serialized Datum; InvalidArgument naming `where` (e.g. the key) when it is not one.
absl::Status ParseDatum(absl::string_view bytes, absl::string_view where, caffe::Datum* datum);

// Checks a raw Datum's declared sizes against its values: channels, height and width positive,
// and their product (computed with checked arithmetic, never wrapped) equal to the length of
// `data` or, when data is empty, to the count of float_data. InvalidArgument naming `where`
// otherwise. An encoded Datum's sizes are its decoder's business (it checks the image itself).
absl::Status CheckDatumSizes(const caffe::Datum& datum, absl::string_view where);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_DATUM_DB_H_
