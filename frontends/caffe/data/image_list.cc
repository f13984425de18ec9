#include "frontends/caffe/data/image_list.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/image_datum.h"

namespace kiln {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

class ImageListReader : public RecordReader {
 public:
  ImageListReader(std::vector<ImageListEntry> entries, ImageListOptions options)
      : entries_(std::move(entries)), options_(std::move(options)) {}

  int64_t Count() const override { return static_cast<int64_t>(entries_.size()); }

  absl::Status Read(int64_t index, std::string* label, caffe::Datum* datum) override {
    if (index < 0 || index >= Count()) {
      return absl::OutOfRangeError(
          absl::StrCat("image index ", index, " is outside [0, ", Count(), ")"));
    }
    const ImageListEntry& entry = entries_[index];
    const std::string path = ImagePath(options_.root_folder, entry.path);
    *label = absl::StrCat("image '", path, "' (list line ", entry.line, ")");
    absl::StatusOr<Image> image =
        LoadImage(path, options_.is_color, options_.new_height, options_.new_width);
    if (!image.ok()) return Annotate(image.status(), absl::StrCat("list line ", entry.line));
    *datum = ImageToDatum(*image, entry.label);
    return absl::OkStatus();
  }

 private:
  std::vector<ImageListEntry> entries_;
  ImageListOptions options_;
};

}  // namespace

absl::StatusOr<std::vector<ImageListEntry>> ParseImageList(absl::string_view text,
                                                           absl::string_view name) {
  std::vector<ImageListEntry> entries;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    while (!line.empty() && IsBlank(line.back())) line.remove_suffix(1);
    size_t start = 0;
    while (start < line.size() && IsBlank(line[start])) ++start;
    if (start == line.size()) continue;  // blank line
    const size_t split = line.find_last_of(" \t");
    if (split == absl::string_view::npos || split < start) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", number, ": expected 'path label', found '", line.substr(start), "'"));
    }
    ImageListEntry entry;
    entry.line = number;
    const absl::string_view label = line.substr(split + 1);
    if (!absl::SimpleAtoi(label, &entry.label)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", number, ": label '", label, "' is not an integer"));
    }
    size_t end = split;
    while (end > start && IsBlank(line[end - 1])) --end;
    // Leading spaces belong to no sane file name; Caffe would keep them, which only makes the
    // file unfindable, so they are dropped like the trailing ones.
    entry.path = std::string(line.substr(start, end - start));
    entries.push_back(std::move(entry));
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the image list has no entries"));
  }
  return entries;
}

absl::StatusOr<std::vector<ImageListEntry>> ReadImageList(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const std::string text, ReadFileBytes(path));
  return ParseImageList(text, path);
}

std::string ImagePath(const std::string& root_folder, const std::string& path) {
  if (root_folder.empty()) return path;
  if (root_folder.back() == '/') return root_folder + path;
  return absl::StrCat(root_folder, "/", path);
}

absl::StatusOr<std::unique_ptr<RecordReader>> MakeImageListReader(
    std::vector<ImageListEntry> entries, const ImageListOptions& options) {
  if (entries.empty()) return absl::InvalidArgumentError("the image list has no entries");
  if (options.new_height < 0 || options.new_width < 0 ||
      (options.new_height > 0) != (options.new_width > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("new_height ", options.new_height, " and new_width ", options.new_width,
                     " must both be positive (resize) or both 0 (keep each image's size)"));
  }
  return std::unique_ptr<RecordReader>(new ImageListReader(std::move(entries), options));
}

}  // namespace kiln
