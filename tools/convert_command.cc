#include "tools/convert_command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/file_identity.h"
#include "base/status_macros.h"
#include "data/idx_file.h"
#include "tools/caffe_commands.h"
#include "tools/command_line.h"
#include "tools/convert_images.h"
#include "tools/progress_line.h"

namespace kiln {

absl::StatusOr<int64_t> ConvertIdx(const IdxConversion& conversion) {
  KILN_ASSIGN_OR_RETURN(const IdxArray images, ReadIdxFile(conversion.images));
  KILN_ASSIGN_OR_RETURN(const IdxArray labels, ReadIdxFile(conversion.labels));
  if (images.dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("images '", conversion.images,
                                                   "': ", images.dims.size(),
                                                   " dimensions, expected 3 (count, rows, cols)"));
  }
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("labels '", conversion.labels,
                                                   "': ", labels.dims.size(),
                                                   " dimensions, expected 1 (count)"));
  }
  const int64_t n = images.dims[0], h = images.dims[1], w = images.dims[2];
  if (labels.dims[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat("images '", conversion.images, "' hold ", n,
                                                   " images but labels '", conversion.labels,
                                                   "' hold ", labels.dims[0], " labels"));
  }
  if (n == 0 || h == 0 || w == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("images '", conversion.images, "': no pixels (", n, "x", h, "x", w, ")"));
  }
  DatumWriterOptions options;
  options.overwrite = conversion.overwrite;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DatumWriter> writer,
                        DatumWriter::Open(conversion.out, conversion.backend, options));
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(static_cast<int>(h));
  datum.set_width(static_cast<int>(w));
  const int64_t pixels = h * w;
  for (int64_t i = 0; i < n; ++i) {
    datum.set_data(images.data.data() + i * pixels, pixels);
    datum.set_label(labels.data[i]);
    KILN_RETURN_IF_ERROR(writer->Put(DatumKey(i), datum));
    if (conversion.progress) conversion.progress(i + 1, n);
  }
  KILN_RETURN_IF_ERROR(writer->Close());
  return n;
}

int ConvertCommand(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list" || arg.rfind("--list=", 0) == 0) return ConvertImagesCommand(argc, argv);
  }
  auto line =
      CommandLine::Parse(argc, argv, 2, {"images", "labels", "out", "backend"}, {"overwrite"});
  if (!line.ok()) return Fail(line.status());
  IdxConversion conversion;
  conversion.images = line->Get("images");
  conversion.labels = line->Get("labels");
  conversion.out = line->Get("out");
  if (conversion.images.empty() || conversion.labels.empty() || conversion.out.empty()) {
    return Fail(absl::InvalidArgumentError(
        "convert needs --images I --labels L --out DIR [--backend lmdb|leveldb] [--overwrite], "
        "or --list L --out DIR ... for images"));
  }
  auto backend = ParseDbBackend(line->Get("backend", "lmdb"));
  if (!backend.ok()) return Fail(backend.status());
  conversion.backend = *backend;
  // The database folder is replaced wholesale with --overwrite: no input may be it or lie in it.
  for (const FlagPath& input :
       {FlagPath{"--images", conversion.images}, FlagPath{"--labels", conversion.labels}}) {
    absl::Status inside = CheckNotInside(input, {"--out", conversion.out});
    if (!inside.ok()) return Fail(inside);
  }
  conversion.overwrite = line->Has("overwrite");
  ProgressLine progress("convert", "records");
  conversion.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
  auto written = ConvertIdx(conversion);
  if (!written.ok()) return Fail(written.status());
  std::printf("wrote %lld records to %s (%s) in %.1fs\n", static_cast<long long>(*written),
              conversion.out.c_str(), std::string(DbBackendName(conversion.backend)).c_str(),
              progress.Seconds());
  return 0;
}

}  // namespace kiln
