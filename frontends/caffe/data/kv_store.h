// The key-value stores under Caffe's databases, behind one small interface so that the Datum
// reader and writer (datum_db.h) hold no LMDB- or LevelDB-specific logic. Internal to data/.
#ifndef KILN_FRONTENDS_CAFFE_DATA_KV_STORE_H_
#define KILN_FRONTENDS_CAFFE_DATA_KV_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Writes a store in batches. Each Write is one transaction: either every pair of the batch is
// stored or none is.
class KvWriter {
 public:
  virtual ~KvWriter() = default;
  virtual absl::Status Write(const std::vector<std::pair<std::string, std::string>>& batch) = 0;
  // Flushes and closes; the writer is unusable afterwards.
  virtual absl::Status Close() = 0;
};

// Reads a store through one cursor that moves in key order. The store must not be written
// while it is read (training data is static).
class KvReader {
 public:
  virtual ~KvReader() = default;
  // Number of records (LMDB keeps it; LevelDB counts once when the store is opened).
  virtual int64_t Count() const = 0;
  // Moves the cursor to the first record; Valid() is false afterwards only for an empty store.
  virtual absl::Status SeekToFirst() = 0;
  virtual bool Valid() const = 0;
  virtual absl::Status Next() = 0;
  // The record under the cursor; only while Valid(), and only until the cursor moves.
  virtual absl::string_view key() const = 0;
  virtual absl::string_view value() const = 0;
  // Random access by key, for shuffled reading; NotFound when absent.
  virtual absl::Status Get(const std::string& key, std::string* value) = 0;
};

// Creates a store at `path` (a directory that must not exist yet) for writing.
absl::StatusOr<std::unique_ptr<KvWriter>> CreateLmdbWriter(const std::string& path);
absl::StatusOr<std::unique_ptr<KvWriter>> CreateLevelDbWriter(const std::string& path);

// Opens an existing store read-only, with the cursor on the first record.
absl::StatusOr<std::unique_ptr<KvReader>> OpenLmdbReader(const std::string& path);
absl::StatusOr<std::unique_ptr<KvReader>> OpenLevelDbReader(const std::string& path);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_KV_STORE_H_
