#include "data/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace kiln {
namespace {

// The largest element count accepted. Far above any real IDX file (Fashion-MNIST's training
// images are 47 MB), low enough that a corrupt header cannot ask for an absurd allocation.
constexpr int64_t kMaxElements = int64_t{1} << 40;
// Data is read in pieces of this size, so a header that lies about the size fails at the end of
// the file instead of allocating what it claims up front.
constexpr int64_t kReadChunk = int64_t{16} << 20;

absl::Status Error(absl::StatusCode code, const std::string& path, const std::string& what) {
  return absl::Status(code, absl::StrCat("idx file '", path, "': ", what));
}

// Closes the gzFile on every return path.
struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads up to `size` bytes; returns how many were read, or an error for a corrupt stream.
absl::StatusOr<int64_t> GzReadSome(gzFile file, const std::string& path, uint8_t* out,
                                   int64_t size) {
  int64_t done = 0;
  while (done < size) {
    const unsigned want = static_cast<unsigned>(std::min<int64_t>(size - done, 1 << 30));
    const int got = gzread(file, out + done, want);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      return Error(absl::StatusCode::kInvalidArgument, path,
                   absl::StrCat("read failed (", message, ")"));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Error(absl::StatusCode::kNotFound, path, "no such file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    return Error(absl::StatusCode::kInvalidArgument, path, "not a regular file");
  }
  // gzread passes plain files through unchanged, so one code path reads both forms.
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return Error(absl::StatusCode::kInternal, path,
                 absl::StrCat("cannot open: ", std::strerror(errno)));
  }
  uint8_t magic[4];
  auto got = GzReadSome(file.get(), path, magic, 4);
  if (!got.ok()) return got.status();
  if (*got < 4) {
    return Error(absl::StatusCode::kInvalidArgument, path,
                 absl::StrCat("truncated: ", *got, " bytes, shorter than the 4-byte magic"));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return Error(absl::StatusCode::kInvalidArgument, path,
                 absl::StrCat("bad magic: first bytes 0x", absl::Hex(magic[0], absl::kZeroPad2),
                              " 0x", absl::Hex(magic[1], absl::kZeroPad2),
                              ", an IDX file starts with two zero bytes"));
  }
  if (magic[2] != 0x08) {
    return Error(absl::StatusCode::kUnimplemented, path,
                 absl::StrCat("element type 0x", absl::Hex(magic[2], absl::kZeroPad2),
                              " is not supported (only 0x08, unsigned byte)"));
  }
  const int rank = magic[3];
  if (rank == 0) return Error(absl::StatusCode::kInvalidArgument, path, "zero dimensions");
  std::vector<uint8_t> header(4 * rank);
  got = GzReadSome(file.get(), path, header.data(), 4 * rank);
  if (!got.ok()) return got.status();
  if (*got < 4 * rank) {
    return Error(absl::StatusCode::kInvalidArgument, path,
                 absl::StrCat("truncated header: ", rank, " dimensions need ", 4 * rank,
                              " bytes after the magic, the file has ", *got));
  }
  IdxArray array;
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = BigEndian32(&header[4 * i]);
    array.dims.push_back(d);
    if (d != 0 && count > kMaxElements / d) {
      return Error(absl::StatusCode::kInvalidArgument, path,
                   absl::StrCat("dimensions overflow: the product passes 2^40 elements at dim ", i,
                                " (", d, ")"));
    }
    count *= d;
  }
  while (static_cast<int64_t>(array.data.size()) < count) {
    const int64_t before = array.data.size();
    const int64_t piece = std::min(kReadChunk, count - before);
    array.data.resize(before + piece);
    got = GzReadSome(file.get(), path, array.data.data() + before, piece);
    if (!got.ok()) return got.status();
    if (*got < piece) {
      return Error(absl::StatusCode::kInvalidArgument, path,
                   absl::StrCat("truncated: the header declares ", count, " bytes of data, ",
                                "the file has ", before + *got));
    }
  }
  uint8_t extra;
  got = GzReadSome(file.get(), path, &extra, 1);
  if (!got.ok()) return got.status();
  if (*got != 0) {
    return Error(absl::StatusCode::kInvalidArgument, path,
                 absl::StrCat("data continues past the ", count,
                              " bytes the header declares (wrong dimensions?)"));
  }
  return array;
}

absl::Status WriteIdxFile(const std::string& path, const IdxArray& array) {
  if (array.dims.empty() || array.dims.size() > 255) {
    return Error(absl::StatusCode::kInvalidArgument, path, "needs 1 to 255 dimensions");
  }
  int64_t count = 1;
  std::string bytes = {0, 0, 0x08, static_cast<char>(array.dims.size())};
  for (int64_t d : array.dims) {
    if (d < 0 || d > 0xffffffffLL) {
      return Error(absl::StatusCode::kInvalidArgument, path,
                   absl::StrCat("dimension ", d, " does not fit in uint32"));
    }
    if (d != 0 && count > kMaxElements / d) {
      return Error(absl::StatusCode::kInvalidArgument, path, "dimensions pass 2^40 elements");
    }
    count *= d;
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  if (count != static_cast<int64_t>(array.data.size())) {
    return Error(absl::StatusCode::kInvalidArgument, path,
                 absl::StrCat("dims hold ", count, " elements but data has ", array.data.size()));
  }
  bytes.append(array.data.begin(), array.data.end());
  return WriteFileBytes(path, bytes);
}

}  // namespace kiln
