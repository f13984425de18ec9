// Fuzz target: bytes read as an IDX file (data/idx_file.h), plain or gzip'd. ReadIdxFile takes a
// path, so the bytes go to an in-memory file (memfd) read through /proc/self/fd: no disk I/O.
// A plain (not gzip'd) input whose header declares more than kMaxDeclared bytes of data is
// skipped: the input is at most a few KB, so it can only be refused as truncated, and ReadIdxFile
// zero-fills a 16 MiB read buffer on the way (70 executions/s instead of thousands); smaller
// declared sizes take the same path.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "data/idx_file.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

constexpr uint64_t kMaxDeclared = uint64_t{1} << 16;

bool DeclaresHugePlainData(const uint8_t* data, size_t size) {
  if (size < 4 || (data[0] == 0x1f && size > 1 && data[1] == 0x8b)) return false;
  uint64_t count = 1;
  for (size_t i = 0; i < data[3] && 8 + 4 * i <= size; ++i) {
    const uint8_t* p = data + 4 + 4 * i;
    const uint64_t d = (uint64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    if (d == 0) return false;
    count = std::min<uint64_t>(count * d, kMaxDeclared + 1);
  }
  return count > kMaxDeclared;
}

int MemoryFile() {
  static const int fd = memfd_create("kiln-idx-fuzz", 0);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (DeclaresHugePlainData(data, size)) return 0;
  const int fd = MemoryFile();
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto array = kiln::ReadIdxFile(path);
  if (!array.ok()) return 0;
  int64_t count = 1;
  for (int64_t d : array->dims) count *= d;
  if (array->dims.empty() || static_cast<int64_t>(array->data.size()) != count) __builtin_trap();
  return 0;
}
