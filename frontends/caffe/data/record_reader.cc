#include "frontends/caffe/data/record_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace {

class DatumRecordReader : public RecordReader {
 public:
  DatumRecordReader(std::unique_ptr<DatumReader> reader, std::vector<std::string> keys)
      : reader_(std::move(reader)), keys_(std::move(keys)) {}

  int64_t Count() const override { return reader_->Count(); }

  absl::Status Read(int64_t index, std::string* label, caffe::Datum* datum) override {
    const int64_t count = reader_->Count();
    if (index < 0 || index >= count) {
      return absl::OutOfRangeError(
          absl::StrCat("record index ", index, " is outside [0, ", count, ")"));
    }
    std::string key;
    if (keys_.empty()) {
      // Forward from the cursor when the record is ahead of it (Skip moves the cursor without
      // reading values), else from the first record: never around the whole database.
      if (index < reader_->position()) KILN_RETURN_IF_ERROR(reader_->Rewind());
      KILN_RETURN_IF_ERROR(reader_->Skip(index - reader_->position()));
      KILN_RETURN_IF_ERROR(reader_->Read(&key, datum));
    } else {
      key = keys_[index];
      KILN_RETURN_IF_ERROR(reader_->Get(key, datum));
    }
    *label = absl::StrCat("record '", key, "'");
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<DatumReader> reader_;
  std::vector<std::string> keys_;  // random access only
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordReader>> MakeDatumRecordReader(
    std::unique_ptr<DatumReader> reader, bool random_access) {
  std::vector<std::string> keys;
  if (random_access) {
    KILN_ASSIGN_OR_RETURN(keys, reader->Keys());
  }
  return std::unique_ptr<RecordReader>(new DatumRecordReader(std::move(reader), std::move(keys)));
}

}  // namespace kiln
