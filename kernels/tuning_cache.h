// TuningCache: algorithm choices measured once and remembered, keyed by problem, precision and
// GPU, so that the second compile of a network skips the measuring. The file is text, one entry
// a line, `key<TAB>value`, sorted by key (deterministic, diffable).
#ifndef KILN_KERNELS_TUNING_CACHE_H_
#define KILN_KERNELS_TUNING_CACHE_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace kiln {

class TuningCache {
 public:
  std::optional<std::string> Lookup(const std::string& key) const;
  void Insert(const std::string& key, const std::string& value);
  size_t size() const;
  // Every entry, by key (what a saved plan keeps of its measured choices).
  std::map<std::string, std::string> Entries() const;
  // True when Insert added or changed an entry since the last Load or Save.
  bool dirty() const;

  // Adds the entries of `path`; a missing file is an empty cache (the first compile), a line
  // without a tab is InvalidArgument naming the file and line.
  absl::Status Load(const std::string& path);
  // Writes every entry to `path` through a temporary file of this process's own and a rename,
  // so a crash never leaves half a file and two processes never write one temporary file.
  absl::Status Save(const std::string& path);

  // For a cache Kiln keeps on its own (the CLI's per-user file, docs/PERF.md "fast by
  // default"), which several processes may share and nobody edits:
  // Adds the entries of `path` only if the whole file parses; returns why it was skipped
  // ("" when it was loaded or does not exist). A damaged cache is measured again, not an error.
  std::string LoadIfValid(const std::string& path);
  // Writes this cache's entries merged with those another process saved to `path` since,
  // creating the folder; this cache itself is left as it is (its entries are what the plans
  // used). Where both have a key the file's value wins: an entry once saved never changes, so a
  // later run (a resumed training among them) finds the choices the first one saved even if
  // another process measured the same problem differently in between.
  absl::Status SaveMerged(const std::string& path);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> entries_;
  bool dirty_ = false;
};

}  // namespace kiln

#endif  // KILN_KERNELS_TUNING_CACHE_H_
