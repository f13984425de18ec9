// Caffe's image lists: the text files of "path label" lines that the ImageData layer and
// convert_imageset read, and a RecordReader that loads the listed images.
#ifndef KILN_FRONTENDS_CAFFE_DATA_IMAGE_LIST_H_
#define KILN_FRONTENDS_CAFFE_DATA_IMAGE_LIST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/caffe/data/record_reader.h"

namespace kiln {

struct ImageListEntry {
  std::string path;  // as the list writes it
  int label = 0;
  int line = 0;  // 1-based line number in the list, for errors
};

// Parses an image list. Each non-blank line is a path, whitespace, and an integer label; the
// label is what follows the last run of spaces or tabs, so paths may contain spaces (Caffe splits
// at the last space too). Trailing whitespace and a Windows "\r" are ignored. InvalidArgument
// naming "<name>:<line>" for a line without a label or with a label that is not an integer, or
// when the list has no entries.
absl::StatusOr<std::vector<ImageListEntry>> ParseImageList(absl::string_view text,
                                                           absl::string_view name);
// ParseImageList of the file at `path` (NotFound when it does not exist).
absl::StatusOr<std::vector<ImageListEntry>> ReadImageList(const std::string& path);

// The file an entry names: Caffe prefixes root_folder to every path (absolute ones included) by
// plain concatenation; Kiln puts a '/' between them when root_folder does not end with one, which
// changes nothing for a root_folder written for Caffe. An empty root_folder leaves the path as
// it is.
std::string ImagePath(const std::string& root_folder, const std::string& path);

// How ImageData loads each image (image_data_param's fields).
struct ImageListOptions {
  std::string root_folder;
  bool is_color = true;
  int new_height = 0;  // both 0: no resize; both positive: resize; anything else is an error
  int new_width = 0;
};

// The records of an image list: record i is entry i's image, loaded (LoadImage) and laid out as a
// raw Datum with the entry's label. Images are read when asked for, not up front. Errors name
// the image's path and its list line. InvalidArgument for an empty list or a bad resize.
absl::StatusOr<std::unique_ptr<RecordReader>> MakeImageListReader(
    std::vector<ImageListEntry> entries, const ImageListOptions& options);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_IMAGE_LIST_H_
