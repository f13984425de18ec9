// The records of one data layer, by index: what a DatumBatchSource batches. A Data layer's records
// come from a Datum database (MakeDatumRecordReader); an ImageData layer's from a list of image
// files (data/image_list.h).
#ifndef KILN_FRONTENDS_CAFFE_DATA_RECORD_READER_H_
#define KILN_FRONTENDS_CAFFE_DATA_RECORD_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "frontends/caffe/caffe.pb.h"
#include "frontends/caffe/data/datum_db.h"

namespace kiln {

// Not thread-safe: DatumBatchSource's prefetch thread is its only user once batching starts.
class RecordReader {
 public:
  virtual ~RecordReader() = default;

  // Records in the source; at least 1.
  virtual int64_t Count() const = 0;

  // Reads record `index` (0 <= index < Count(), in the source's own order) into `datum` (raw or
  // encoded) and sets `label` to how errors should name it ("record '00000004'",
  // "image 'photos/cat.jpg'"). Errors of the reader itself already name the record.
  virtual absl::Status Read(int64_t index, std::string* label, caffe::Datum* datum) = 0;
};

// Records of a Datum database in key order. With `random_access` false the reader expects
// indices that go forward a few records at a time (wrapping around at the end) and follows them
// with the database cursor; with it true (shuffled reading) it loads every key once and reads by
// key, so any order is cheap.
absl::StatusOr<std::unique_ptr<RecordReader>> MakeDatumRecordReader(
    std::unique_ptr<DatumReader> reader, bool random_access);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_RECORD_READER_H_
