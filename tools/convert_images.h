// `kiln convert --list`: an image list ("path label" lines) and its images into a Caffe Datum
// database, as Caffe's convert_imageset does.
#ifndef KILN_TOOLS_CONVERT_IMAGES_H_
#define KILN_TOOLS_CONVERT_IMAGES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/data/datum_db.h"

namespace kiln {

struct ImageListConversion {
  std::string list;         // the image list
  std::string root_folder;  // prefixed to every listed path (data/image_list.h, ImagePath)
  std::string out;          // the database directory to create
  DbBackend backend = DbBackend::kLmdb;
  bool overwrite = false;
  // Both positive: every image is resized to resize_height x resize_width (bilinear, as Caffe's
  // cv::resize); both 0: images keep their size. One alone is InvalidArgument.
  int resize_height = 0;
  int resize_width = 0;
  bool gray = false;  // decode to 1 channel instead of 3 (BGR)
  // Write the entries in a seeded random order instead of list order (a Fisher-Yates shuffle
  // drawing from std::mt19937_64, so a seed gives the same order everywhere).
  bool shuffle = false;
  uint64_t seed = 1;
  // Store each file's own bytes with encoded = true (the Data layer decodes them), as
  // convert_imageset --encoded does when it need not re-encode. Every image is still decoded once
  // to check it. Kiln has no image encoder, so this cannot be combined with resizing.
  bool encoded = false;
  // Require every image to decode to the size of the first (convert_imageset --check_size).
  bool check_size = false;
  // Skip images that cannot be read or decoded, reporting each in `skipped`, instead of failing
  // (convert_imageset skips them with a log line). Off by default: a data set that silently
  // shrinks is worse than an error.
  bool skip_bad = false;
  // Called after every entry with (done, total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct ImageListResult {
  int64_t written = 0;
  std::vector<std::string> skipped;  // the errors of the images skip_bad skipped
};

// Writes one Datum per listed image (CHW, BGR, labelled) under the keys convert_imageset gives:
// DatumKey(i) + "_" + the listed path, i being the entry's position in the written order, so the
// database reads back in that order. Errors name the list line or the image file.
absl::StatusOr<ImageListResult> ConvertImageList(const ImageListConversion& conversion);

// The image-list form of `kiln convert` (argv as ConvertCommand gets it):
// kiln convert --list L [--root_folder R] --out DIR [--backend lmdb|leveldb] [--overwrite]
//   [--resize_height H --resize_width W] [--gray] [--shuffle [--seed S]] [--encoded]
//   [--check_size] [--skip_bad]
int ConvertImagesCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_CONVERT_IMAGES_H_
