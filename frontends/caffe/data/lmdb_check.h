// A read-only check of an LMDB data file, run before liblmdb maps it. liblmdb trusts the file:
// a data.mdb shorter than its meta page declares is mapped past its end (SIGBUS on the first
// read there), and a damaged page trips an assert() inside the library (abort). Neither can be
// caught once it happens, so the check reads the file itself (pread, never the map) and refuses
// what liblmdb could not read safely. Internal to data/.
//
// What it checks, from the LMDB file format (lmdb.h's documented structures, 64-bit layout):
//   * both meta pages: the meta flag, the magic number, the format version, one page size (a
//     power of two from 512 to 65536); the newer of the two (larger transaction id) is the one
//     liblmdb uses, and so the one checked from here on;
//   * the file holds every page the meta declares: (last page + 1) x page size <= file size;
//   * the main database is a plain one (no duplicate-key or integer-key flags, no named
//     sub-databases), as Caffe writes it;
//   * every branch and leaf page of the main B-tree, walked from the root: its page number and
//     kind, its header bounds, every node inside the page, every child and overflow run inside
//     the declared pages, no page reached twice, every leaf at the declared depth, keys strictly
//     ascending and inside their parent's separators, and the record count the meta declares.
// Overflow pages (large values) are bounded from their node, not read: liblmdb does not look at
// their headers either. A value's bytes are not checked (LMDB keeps no checksum): a damaged value
// is caught later, when it does not parse as a Datum or its sizes do not add up.
#ifndef KILN_FRONTENDS_CAFFE_DATA_LMDB_CHECK_H_
#define KILN_FRONTENDS_CAFFE_DATA_LMDB_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

// Checks `dir`/data.mdb. When liblmdb can read the main database without leaving the file or
// tripping an assert, returns the bytes of the pages the meta declares (what the reader must
// map; the map size stored in the meta page is not trusted). InvalidArgument naming the file and
// the place otherwise (the byte sizes for a truncated file; the page, and the record index and key
// nearest to it, for a damaged page); NotFound when there is no data.mdb.
absl::StatusOr<uint64_t> CheckLmdbFile(const std::string& dir);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_LMDB_CHECK_H_
