#include "tools/convert_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "data/idx_file.h"
#include "engine/status_macros.h"
#include "tools/caffe_commands.h"
#include "tools/command_line.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

// One progress line on stderr: rewritten in place on a terminal, a new line every few seconds
// when stderr goes to a file or a pipe (where carriage returns would pile up).
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_(start_) {}

  void Update(int64_t done, int64_t total) {
    const Clock::time_point now = Clock::now();
    const double since_last = std::chrono::duration<double>(now - last_).count();
    if (done != total && since_last < (tty_ ? 0.1 : 5.0)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0.0;
    const double eta = rate > 0 ? (total - done) / rate : 0.0;
    std::fprintf(stderr, "%sconvert: %lld/%lld records (%.1f%%), %.0f records/s, ETA %.0fs%s",
                 tty_ ? "\r" : "", static_cast<long long>(done), static_cast<long long>(total),
                 total > 0 ? 100.0 * done / total : 100.0, rate, eta,
                 tty_ && done != total ? "" : "\n");
    std::fflush(stderr);
  }

  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_;
};

}  // namespace

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
  auto line =
      CommandLine::Parse(argc, argv, 2, {"images", "labels", "out", "backend"}, {"overwrite"});
  if (!line.ok()) return Fail(line.status());
  IdxConversion conversion;
  conversion.images = line->Get("images");
  conversion.labels = line->Get("labels");
  conversion.out = line->Get("out");
  if (conversion.images.empty() || conversion.labels.empty() || conversion.out.empty()) {
    return Fail(absl::InvalidArgumentError(
        "convert needs --images I --labels L --out DIR [--backend lmdb|leveldb] [--overwrite]"));
  }
  auto backend = ParseDbBackend(line->Get("backend", "lmdb"));
  if (!backend.ok()) return Fail(backend.status());
  conversion.backend = *backend;
  conversion.overwrite = line->Has("overwrite");
  ProgressLine progress;
  conversion.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
  auto written = ConvertIdx(conversion);
  if (!written.ok()) return Fail(written.status());
  std::printf("wrote %lld records to %s (%s) in %.1fs\n", static_cast<long long>(*written),
              conversion.out.c_str(), std::string(DbBackendName(conversion.backend)).c_str(),
              progress.Seconds());
  return 0;
}

}  // namespace kiln
