#include "frontends/caffe/data/lmdb_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/checked_int.h"
#include "base/status_macros.h"

namespace kiln {
namespace {

// The on-disk layout (little-endian, 64-bit page numbers), as lmdb.h and its format notes
// describe it. A page starts with a 16-byte header: page number (8), pad (2), flags (2), then the
// lower and upper bounds of the free space (2 + 2); an array of 2-byte node offsets follows.
constexpr uint64_t kPageHeader = 16;
constexpr uint16_t kPageBranch = 0x01;
constexpr uint16_t kPageLeaf = 0x02;
constexpr uint16_t kPageOverflow = 0x04;
constexpr uint16_t kPageMeta = 0x08;
constexpr uint16_t kPageLeaf2 = 0x20;
constexpr uint16_t kPageSub = 0x40;
constexpr uint16_t kPageKinds =
    kPageBranch | kPageLeaf | kPageOverflow | kPageMeta | kPageLeaf2 | kPageSub;

// A node: two 16-bit halves of the data size (leaf) or of the child page number (branch), the
// flags (a leaf's; a branch keeps the page number's high bits there), the key size, the key, then
// (leaf) the value or, for a large value, the number of its first overflow page.
constexpr uint64_t kNodeHeader = 8;
constexpr uint16_t kNodeBigData = 0x01;

// The meta page, after the page header: magic (4), version (4), map address (8), map size (8),
// two database records of 48 bytes (the free list's, whose first 4 bytes hold the page size, and
// the main database's), the last page number (8) and the transaction id (8).
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kMetaMagic = 16;
constexpr uint64_t kMetaVersion = 20;
constexpr uint64_t kMetaFreeDb = 40;
constexpr uint64_t kMetaMainDb = 88;
constexpr uint64_t kMetaLastPage = 136;
constexpr uint64_t kMetaTxnId = 144;
constexpr uint64_t kMetaEnd = 152;
// Inside a database record: flags (2 at 4), depth (2 at 6), page counts (3 x 8), entries (8 at
// 32), root page (8 at 40).
constexpr uint64_t kDbFlags = 4;
constexpr uint64_t kDbDepth = 6;
constexpr uint64_t kDbEntries = 32;
constexpr uint64_t kDbRoot = 40;
constexpr uint64_t kNoPage = ~uint64_t{0};  // the root of an empty database

// liblmdb's cursor holds at most 32 pages, root to leaf.
constexpr int kMaxDepth = 32;

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

std::string Shown(absl::string_view key) {
  constexpr size_t kMaxShown = 48;
  std::string shown = absl::CHexEscape(key.substr(0, kMaxShown));
  if (key.size() > kMaxShown) absl::StrAppend(&shown, "...");
  return shown;
}

struct Meta {
  uint32_t page_size = 0;
  uint16_t flags = 0;
  uint16_t depth = 0;
  uint64_t entries = 0;
  uint64_t root = 0;
  uint64_t last_page = 0;
  uint64_t txn_id = 0;
};

class Checker {
 public:
  Checker(std::string file, int fd, uint64_t file_size)
      : file_(std::move(file)), fd_(fd), file_size_(file_size) {}

  // The bytes the meta page declares, once everything checked out.
  uint64_t declared_bytes() const { return declared_bytes_; }

  absl::Status Run() {
    Meta metas[2];
    if (file_size_ < kMetaEnd) {
      return Error(absl::StrCat("truncated: the file has ", file_size_,
                                " bytes, too few for an LMDB meta page (", kMetaEnd, ")"));
    }
    absl::Status status = ReadMeta(0, 0, &metas[0]);
    if (!status.ok()) return status;
    const uint64_t second = metas[0].page_size;
    if (file_size_ < second + kMetaEnd) {
      return Error(absl::StrCat("truncated: the file has ", file_size_,
                                " bytes, too few for the second meta page (", second + kMetaEnd,
                                " with pages of ", second, " bytes)"));
    }
    status = ReadMeta(1, second, &metas[1]);
    if (!status.ok()) return status;
    if (metas[1].page_size != metas[0].page_size) {
      return Error(absl::StrCat("the meta pages disagree on the page size (", metas[0].page_size,
                                " and ", metas[1].page_size, ")"));
    }
    // liblmdb reads through the newer meta page (the larger transaction id; the first on a tie).
    const Meta& meta = metas[metas[1].txn_id > metas[0].txn_id ? 1 : 0];
    meta_ = meta;
    page_size_ = meta.page_size;

    // Every page up to the last one the meta declares must be in the file: liblmdb maps that
    // much and reads it without asking how long the file is.
    const std::optional<int64_t> pages = meta.last_page < static_cast<uint64_t>(INT64_MAX) - 1
                                             ? CheckedAdd(static_cast<int64_t>(meta.last_page), 1)
                                             : std::nullopt;
    const std::optional<int64_t> declared =
        pages ? CheckedMul(*pages, static_cast<int64_t>(page_size_)) : std::nullopt;
    if (!declared) {
      return Error(absl::StrCat("the meta page declares last page ", meta.last_page, " of ",
                                page_size_, " bytes, past any file size: the file is damaged"));
    }
    if (meta.last_page < 1) {
      return Error(absl::StrCat("the meta page declares last page ", meta.last_page,
                                ", before the two meta pages: the file is damaged"));
    }
    if (static_cast<uint64_t>(*declared) > file_size_) {
      return Error(absl::StrCat("truncated: its meta page declares ", *pages, " pages of ",
                                page_size_, " bytes (", *declared, " bytes) but the file has ",
                                file_size_, " bytes"));
    }

    declared_bytes_ = static_cast<uint64_t>(*declared);

    if (meta.flags != 0) {
      return Error(
          absl::StrFormat("the main database has flags 0x%x (duplicate or integer keys):"
                          " not a database of Caffe records",
                          meta.flags));
    }
    if (meta.root == kNoPage) {
      if (meta.entries != 0 || meta.depth != 0) {
        return Error(absl::StrCat("the meta page declares an empty tree holding ", meta.entries,
                                  " records at depth ", meta.depth, ": the file is damaged"));
      }
      return absl::OkStatus();
    }
    if (meta.depth < 1 || meta.depth > kMaxDepth) {
      return Error(absl::StrCat("the meta page declares a tree of depth ", meta.depth, " (1 to ",
                                kMaxDepth, "): the file is damaged"));
    }
    if (meta.root < 2 || meta.root > meta.last_page) {
      return Error(absl::StrCat("the meta page declares root page ", meta.root,
                                ", outside pages 2 to ", meta.last_page, ": the file is damaged"));
    }
    seen_.assign(meta.last_page + 1, false);
    buffers_.resize(meta.depth);
    status = Walk(meta.root, 1, absl::string_view(), false, absl::string_view(), false);
    if (!status.ok()) return status;
    if (static_cast<uint64_t>(records_) != meta.entries) {
      return Error(absl::StrCat("the meta page declares ", meta.entries,
                                " records but the tree holds ", records_, ": the file is damaged"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("lmdb '", file_, "': ", what));
  }

  // Where the walk is, in records: the index (in key order) of the record a damaged page holds
  // or precedes, and the key before it.
  std::string Near() const {
    if (records_ == 0) return "at record 0 (before the first key)";
    return absl::StrCat("at record ", records_, " (after key '", Shown(last_key_), "')");
  }

  absl::Status Damaged(uint64_t page, int level, absl::string_view what) const {
    return Error(absl::StrCat("damaged page ", page, " (", level == meta_.depth ? "leaf" : "branch",
                              " level ", level, " of ", meta_.depth, ") ", Near(), ": ", what));
  }

  absl::Status ReadAt(uint64_t offset, uint64_t size, char* out) const {
    uint64_t done = 0;
    while (done < size) {
      const ssize_t n = pread(fd_, out + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error(absl::StrCat("cannot read: ", std::strerror(errno)));
      if (n == 0) {
        return Error(absl::StrCat("truncated: the file ended at byte ", offset + done,
                                  " while reading ", size, " bytes at ", offset));
      }
      done += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status ReadMeta(int index, uint64_t offset, Meta* meta) {
    char page[kMetaEnd];
    absl::Status status = ReadAt(offset, kMetaEnd, page);
    if (!status.ok()) return status;
    const std::string which = absl::StrCat("meta page ", index);
    const uint16_t flags = Load<uint16_t>(page + 10);
    const uint32_t magic = Load<uint32_t>(page + kMetaMagic);
    if ((flags & kPageKinds) != kPageMeta || magic != kMagic) {
      return Error(
          absl::StrFormat("not an LMDB data file, or a damaged one (%s: flags 0x%x, magic "
                          "0x%08x, expected 0x%x and 0x%08x)",
                          which, flags, magic, kPageMeta, kMagic));
    }
    const uint32_t version = Load<uint32_t>(page + kMetaVersion);
    if (version != kFormatVersion) {
      return Error(absl::StrCat(which, ": format version ", version, ", this reader knows ",
                                kFormatVersion));
    }
    meta->page_size = Load<uint32_t>(page + kMetaFreeDb);
    if (meta->page_size < 512 || meta->page_size > 65536 ||
        (meta->page_size & (meta->page_size - 1)) != 0) {
      return Error(absl::StrCat(which, ": page size ", meta->page_size,
                                " is not a power of two from 512 to 65536: the file is damaged"));
    }
    meta->flags = Load<uint16_t>(page + kMetaMainDb + kDbFlags);
    meta->depth = Load<uint16_t>(page + kMetaMainDb + kDbDepth);
    meta->entries = Load<uint64_t>(page + kMetaMainDb + kDbEntries);
    meta->root = Load<uint64_t>(page + kMetaMainDb + kDbRoot);
    meta->last_page = Load<uint64_t>(page + kMetaLastPage);
    meta->txn_id = Load<uint64_t>(page + kMetaTxnId);
    return absl::OkStatus();
  }

  // Walks the subtree of `page` at `level` (the root is 1). Every key in it must be >= `low`
  // (when has_low) and < `high` (when has_high): the separators of the branch pages above.
  absl::Status Walk(uint64_t page, int level, absl::string_view low, bool has_low,
                    absl::string_view high, bool has_high) {
    if (seen_[page]) return Damaged(page, level, "the page is reached twice in the tree");
    seen_[page] = true;
    std::vector<char>& buffer = buffers_[level - 1];
    buffer.resize(page_size_);
    absl::Status status = ReadAt(page * page_size_, page_size_, buffer.data());
    if (!status.ok()) return status;
    const char* p = buffer.data();
    const bool leaf = level == meta_.depth;
    const uint64_t number = Load<uint64_t>(p);
    const uint16_t flags = Load<uint16_t>(p + 10);
    const uint64_t lower = Load<uint16_t>(p + 12);
    const uint64_t upper = Load<uint16_t>(p + 14);
    if (number != page) {
      return Damaged(page, level, absl::StrCat("its header says page ", number));
    }
    if ((flags & kPageKinds) != (leaf ? kPageLeaf : kPageBranch)) {
      return Damaged(page, level,
                     absl::StrFormat("its flags 0x%x are not those of a %s page", flags,
                                     leaf ? "leaf" : "branch"));
    }
    if (lower < kPageHeader || lower > upper || upper > page_size_ ||
        (lower - kPageHeader) % 2 != 0) {
      return Damaged(page, level,
                     absl::StrCat("its free space bounds (", lower, ", ", upper,
                                  ") do not fit a page of ", page_size_, " bytes"));
    }
    const uint64_t nodes = (lower - kPageHeader) / 2;
    if (nodes < (leaf ? 1u : 2u)) {
      return Damaged(page, level, absl::StrCat("it holds ", nodes, " nodes"));
    }
    absl::string_view previous;
    for (uint64_t i = 0; i < nodes; ++i) {
      const uint64_t offset = Load<uint16_t>(p + kPageHeader + 2 * i);
      if (offset < upper || offset % 2 != 0 || offset + kNodeHeader > page_size_) {
        return Damaged(page, level,
                       absl::StrCat("node ", i, " starts at byte ", offset,
                                    ", outside the node area [", upper, ", ", page_size_, ")"));
      }
      const char* node = p + offset;
      const uint64_t lo = Load<uint16_t>(node), hi = Load<uint16_t>(node + 2);
      const uint16_t node_flags = Load<uint16_t>(node + 4);
      const uint64_t key_size = Load<uint16_t>(node + 6);
      const uint64_t key_end = offset + kNodeHeader + key_size;
      if (key_end > page_size_) {
        return Damaged(page, level,
                       absl::StrCat("node ", i, "'s key of ", key_size, " bytes at byte ",
                                    offset + kNodeHeader, " runs past the page"));
      }
      const absl::string_view key(node + kNodeHeader, key_size);
      if (leaf) {
        KILN_RETURN_IF_ERROR(CheckLeafNode(page, level, i, lo | (hi << 16), node_flags, key_end, p,
                                           key, low, has_low, high, has_high));
        continue;
      }
      const uint64_t child = lo | (hi << 16) | (static_cast<uint64_t>(node_flags) << 32);
      if (child < 2 || child > meta_.last_page) {
        return Damaged(page, level,
                       absl::StrCat("node ", i, " points to page ", child, ", outside pages 2 to ",
                                    meta_.last_page));
      }
      // The first node's key is implicit (everything below the second separator).
      if (i >= 1) {
        if ((i >= 2 && key <= previous) || (has_low && key < low) || (has_high && key >= high)) {
          return Damaged(page, level,
                         absl::StrCat("separator ", i, " ('", Shown(key), "') is out of order"));
        }
        previous = key;
      }
      // The child's bounds: its own separator (or the parent's low bound) up to the next one.
      absl::string_view child_low = i == 0 ? low : key;
      const bool child_has_low = i == 0 ? has_low : true;
      absl::string_view child_high = high;
      bool child_has_high = has_high;
      if (i + 1 < nodes) {
        const uint64_t next = Load<uint16_t>(p + kPageHeader + 2 * (i + 1));
        if (next < upper || next % 2 != 0 || next + kNodeHeader > page_size_ ||
            next + kNodeHeader + Load<uint16_t>(p + next + 6) > page_size_) {
          return Damaged(page, level,
                         absl::StrCat("node ", i + 1, " at byte ", next, " lies outside the page"));
        }
        child_high = absl::string_view(p + next + kNodeHeader, Load<uint16_t>(p + next + 6));
        child_has_high = true;
      }
      status = Walk(child, level + 1, child_low, child_has_low, child_high, child_has_high);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  absl::Status CheckLeafNode(uint64_t page, int level, uint64_t i, uint64_t data_size,
                             uint16_t node_flags, uint64_t key_end, const char* p,
                             absl::string_view key, absl::string_view low, bool has_low,
                             absl::string_view high, bool has_high) {
    const std::string node = absl::StrCat("record node ", i, " (key '", Shown(key), "')");
    if ((node_flags & ~kNodeBigData) != 0) {
      return Damaged(page, level,
                     absl::StrFormat("%s has flags 0x%x: a sub-database or duplicate keys, not a "
                                     "plain record",
                                     node, node_flags));
    }
    if (node_flags & kNodeBigData) {
      // The value lives on its own run of overflow pages: the header, then the bytes.
      if (key_end + 8 > page_size_) {
        return Damaged(page, level,
                       absl::StrCat(node, ": its overflow page number runs past the page"));
      }
      const uint64_t first = Load<uint64_t>(p + key_end);
      const uint64_t run = (kPageHeader - 1 + data_size) / page_size_ + 1;
      if (first < 2 || first > meta_.last_page || run - 1 > meta_.last_page - first) {
        return Damaged(
            page, level,
            absl::StrCat(node, ": its value of ", data_size, " bytes on overflow pages ", first,
                         " to ", first + run - 1, " lies outside pages 2 to ", meta_.last_page));
      }
    } else if (key_end + data_size > page_size_) {
      return Damaged(page, level,
                     absl::StrCat(node, ": its value of ", data_size, " bytes runs past the page"));
    }
    if ((records_ > 0 && key <= last_key_) || (has_low && key < low) || (has_high && key >= high)) {
      return Damaged(page, level, absl::StrCat(node, ": the key is out of order"));
    }
    last_key_.assign(key.data(), key.size());
    ++records_;
    return absl::OkStatus();
  }

  std::string file_;
  int fd_;
  uint64_t file_size_;
  Meta meta_;
  uint64_t page_size_ = 0;
  uint64_t declared_bytes_ = 0;
  std::vector<bool> seen_;
  std::vector<std::vector<char>> buffers_;  // one page per level, alive while its level is walked
  int64_t records_ = 0;
  std::string last_key_;
};

}  // namespace

absl::StatusOr<uint64_t> CheckLmdbFile(const std::string& dir) {
  const std::string file = absl::StrCat(dir, "/data.mdb");
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string message =
        absl::StrCat("lmdb '", file, "': cannot open: ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  struct stat info;
  absl::Status status;
  uint64_t declared = 0;
  if (fstat(fd, &info) != 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat("lmdb '", file, "': cannot stat: ", std::strerror(errno)));
  } else if (!S_ISREG(info.st_mode)) {
    status = absl::InvalidArgumentError(absl::StrCat("lmdb '", file, "': not a regular file"));
  } else {
    Checker checker(file, fd, static_cast<uint64_t>(info.st_size));
    status = checker.Run();
    declared = checker.declared_bytes();
  }
  close(fd);
  if (!status.ok()) return status;
  return declared;
}

}  // namespace kiln
