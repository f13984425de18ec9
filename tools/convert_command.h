// `kiln convert`: IDX image and label files (MNIST, Fashion-MNIST) into a Caffe Datum database
// that a Data layer reads, as Caffe's convert_mnist_data does; with --list, an image list and
// its JPEG/PNG files (tools/convert_images.h), as convert_imageset does.
#ifndef KILN_TOOLS_CONVERT_COMMAND_H_
#define KILN_TOOLS_CONVERT_COMMAND_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "frontends/caffe/data/datum_db.h"

namespace kiln {

struct IdxConversion {
  std::string images;  // IDX (N, H, W) u8, plain or .gz
  std::string labels;  // IDX (N) u8
  std::string out;     // the database directory to create
  DbBackend backend = DbBackend::kLmdb;
  bool overwrite = false;
  // Called after every record with (written, total), so a caller can show progress; may be
  // empty.
  std::function<void(int64_t, int64_t)> progress;
};

// Writes one 1xHxW Datum per image, labelled, under keys DatumKey(0..N-1) so the database reads
// back in file order. Returns the number of records. InvalidArgument when the files are not
// (N, H, W) images and (N) labels of the same N.
absl::StatusOr<int64_t> ConvertIdx(const IdxConversion& conversion);

// kiln convert --images I --labels L --out DIR [--backend lmdb|leveldb] [--overwrite], or
// kiln convert --list L ... (ConvertImagesCommand). Prints a live progress line (count, rate,
// ETA) on stderr and a summary on stdout.
int ConvertCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_CONVERT_COMMAND_H_
