#include "tools/convert_images.h"

#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_identity.h"
#include "base/status_macros.h"
#include "data/image_decoder.h"
#include "data/image_resize.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/image_datum.h"
#include "frontends/caffe/data/image_list.h"
#include "tools/caffe_commands.h"
#include "tools/command_line.h"
#include "tools/progress_line.h"

namespace kiln {
namespace {

// Fisher-Yates with the generator's output modulo i+1, so the order is the same with every
// standard library (std::shuffle's algorithm is not specified).
void Shuffle(std::vector<ImageListEntry>& entries, uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  std::mt19937_64 rng(seq);
  for (size_t i = entries.size(); i > 1; --i) {
    std::swap(entries[i - 1], entries[rng() % i]);
  }
}

// One entry as a Datum: decoded (and resized) pixels, or the file's own bytes when encoded.
// `dims` gets the decoded (C, H, W) for --check_size.
absl::Status MakeDatum(const ImageListConversion& c, const ImageListEntry& entry,
                       caffe::Datum* datum, std::vector<int>* dims) {
  const std::string path = ImagePath(c.root_folder, entry.path);
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  KILN_ASSIGN_OR_RETURN(Image image,
                        DecodeImage(bytes, c.gray ? ColorMode::kGray : ColorMode::kColor, path));
  if (c.resize_height > 0 && (image.height != c.resize_height || image.width != c.resize_width)) {
    absl::StatusOr<Image> resized = ResizeBilinear(image, c.resize_height, c.resize_width);
    if (!resized.ok()) return Annotate(resized.status(), path);
    image = std::move(*resized);
  }
  *dims = {image.channels, image.height, image.width};
  if (c.encoded) {
    // As convert_imageset: the file's bytes and the label; the size is in the file.
    datum->Clear();
    datum->set_data(std::move(bytes));
    datum->set_label(entry.label);
    datum->set_encoded(true);
  } else {
    *datum = ImageToDatum(image, entry.label);
  }
  return absl::OkStatus();
}

std::string DimsText(const std::vector<int>& dims) {
  return absl::StrCat(dims[0], "x", dims[1], "x", dims[2]);
}

}  // namespace

absl::StatusOr<ImageListResult> ConvertImageList(const ImageListConversion& conversion) {
  const ImageListConversion& c = conversion;
  if (c.resize_height < 0 || c.resize_width < 0 || (c.resize_height > 0) != (c.resize_width > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resize_height ", c.resize_height, " and --resize_width ", c.resize_width,
                     " must both be positive (resize) or both 0 (keep each image's size)"));
  }
  if (c.encoded && c.resize_height > 0) {
    return absl::InvalidArgumentError(
        "--encoded stores each file's own bytes, so it cannot be combined with --resize_height/"
        "--resize_width (Kiln has no image encoder); resize when training instead "
        "(image_data_param's new_height/new_width) or store decoded pixels");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ImageListEntry> entries, ReadImageList(c.list));
  if (c.shuffle) Shuffle(entries, c.seed);

  DatumWriterOptions options;
  options.overwrite = c.overwrite;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DatumWriter> writer,
                        DatumWriter::Open(c.out, c.backend, options));
  // After the writer exists a failure leaves a database that ends early; say so.
  auto incomplete = [&c](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (the database '", c.out,
                                               "' is left incomplete; --overwrite replaces it)"));
  };
  ImageListResult result;
  std::vector<int> first_dims, dims;
  caffe::Datum datum;
  const int64_t total = static_cast<int64_t>(entries.size());
  for (int64_t i = 0; i < total; ++i) {
    const ImageListEntry& entry = entries[i];
    absl::Status made = MakeDatum(c, entry, &datum, &dims);
    if (!made.ok()) {
      made = Annotate(made, absl::StrCat(c.list, ":", entry.line));
      if (!c.skip_bad) return incomplete(made);
      result.skipped.push_back(std::string(made.message()));
      if (c.progress) c.progress(i + 1, total);
      continue;
    }
    if (first_dims.empty()) {
      first_dims = dims;
    } else if (c.check_size && dims != first_dims) {
      return incomplete(absl::InvalidArgumentError(absl::StrCat(
          c.list, ":", entry.line, ": image '", ImagePath(c.root_folder, entry.path), "' is ",
          DimsText(dims), " but the first image is ", DimsText(first_dims), " (--check_size)")));
    }
    // convert_imageset's key: the position, then the listed path.
    absl::Status put = writer->Put(absl::StrCat(DatumKey(i), "_", entry.path), datum);
    if (!put.ok()) return incomplete(put);
    ++result.written;
    if (c.progress) c.progress(i + 1, total);
  }
  if (result.written == 0) {
    return incomplete(absl::InvalidArgumentError(absl::StrCat(
        c.list, ": no image could be converted (", result.skipped.size(), " skipped)")));
  }
  KILN_RETURN_IF_ERROR(writer->Close());
  return result;
}

int ConvertImagesCommand(int argc, char** argv) {
  auto line = CommandLine::Parse(
      argc, argv, 2,
      {"list", "root_folder", "out", "backend", "resize_height", "resize_width", "seed"},
      {"overwrite", "gray", "shuffle", "encoded", "check_size", "skip_bad"});
  if (!line.ok()) return Fail(line.status());
  ImageListConversion c;
  c.list = line->Get("list");
  c.root_folder = line->Get("root_folder");
  c.out = line->Get("out");
  if (c.list.empty() || c.out.empty()) {
    return Fail(absl::InvalidArgumentError(
        "convert needs --list L --out DIR [--root_folder R] [--backend lmdb|leveldb] "
        "[--overwrite] [--resize_height H --resize_width W] [--gray] [--shuffle [--seed S]] "
        "[--encoded] [--check_size] [--skip_bad]"));
  }
  auto backend = ParseDbBackend(line->Get("backend", "lmdb"));
  if (!backend.ok()) return Fail(backend.status());
  c.backend = *backend;
  // The database folder is replaced wholesale with --overwrite: no input may be it or lie in it.
  for (const FlagPath& input :
       {FlagPath{"--list", c.list}, FlagPath{"--root_folder", c.root_folder}}) {
    if (input.path.empty()) continue;
    absl::Status inside = CheckNotInside(input, {"--out", c.out});
    if (!inside.ok()) return Fail(inside);
  }
  for (auto [flag, value] : {std::pair<const char*, int*>{"resize_height", &c.resize_height},
                             std::pair<const char*, int*>{"resize_width", &c.resize_width}}) {
    if (line->Has(flag) && !absl::SimpleAtoi(line->Get(flag), value)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--", flag, " '", line->Get(flag), "' is not an integer")));
    }
  }
  if (line->Has("seed") && !absl::SimpleAtoi(line->Get("seed"), &c.seed)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--seed '", line->Get("seed"), "' is not a non-negative integer")));
  }
  c.overwrite = line->Has("overwrite");
  c.gray = line->Has("gray");
  c.shuffle = line->Has("shuffle");
  c.encoded = line->Has("encoded");
  c.check_size = line->Has("check_size");
  c.skip_bad = line->Has("skip_bad");
  ProgressLine progress("convert", "images");
  c.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
  auto result = ConvertImageList(c);
  if (!result.ok()) return Fail(result.status());
  for (const std::string& skipped : result->skipped) {
    std::fprintf(stderr, "convert: skipped %s\n", skipped.c_str());
  }
  std::printf("wrote %lld records to %s (%s%s) in %.1fs", static_cast<long long>(result->written),
              c.out.c_str(), std::string(DbBackendName(c.backend)).c_str(),
              c.encoded ? ", encoded" : "", progress.Seconds());
  if (!result->skipped.empty()) std::printf(", %zu images skipped", result->skipped.size());
  std::printf("\n");
  return 0;
}

}  // namespace kiln
