#include "kernels/tuning_cache.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

std::optional<std::string> TuningCache::Lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuningCache::Insert(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = entries_.emplace(key, value);
  if (!added && it->second == value) return;
  it->second = value;
  dirty_ = true;
}

std::map<std::string, std::string> TuningCache::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

size_t TuningCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

bool TuningCache::dirty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dirty_;
}

namespace {

// The entries of `path` (none when it does not exist), or InvalidArgument at the first line that
// is not KEY<TAB>VALUE.
absl::Status ReadEntries(const std::string& path, std::map<std::string, std::string>* entries) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();  // no file yet: nothing measured so far
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuning file ", path, ":", number, ": expected KEY<TAB>VALUE"));
    }
    (*entries)[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TuningCache::Load(const std::string& path) {
  std::map<std::string, std::string> read;
  const absl::Status status = ReadEntries(path, &read);
  std::lock_guard<std::mutex> lock(mu_);
  // As before this file was factored: the lines before a malformed one are kept.
  for (auto& [key, value] : read) entries_[key] = std::move(value);
  if (status.ok()) dirty_ = false;
  return status;
}

std::string TuningCache::LoadIfValid(const std::string& path) {
  std::map<std::string, std::string> read;
  const absl::Status status = ReadEntries(path, &read);
  if (!status.ok()) return std::string(status.message());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, value] : read) entries_.emplace(key, std::move(value));
  return "";
}

namespace {

// Writes `entries` to `path` through a temporary file of this process's own and a rename.
absl::Status WriteEntries(const std::string& path,
                          const std::map<std::string, std::string>& entries) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temporary));
    out << "# kiln tuning file: measured algorithm choices, key<TAB>value\n";
    for (const auto& [key, value] : entries) out << key << '\t' << value << '\n';
    if (!out.flush()) return absl::InternalError(absl::StrCat("writing ", temporary, " failed"));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TuningCache::SaveMerged(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", folder.string(), ": ", error.message()));
    }
  }
  // This cache's entries stay as they are (they are what the plan used); the file gets them with
  // what it already holds on top.
  std::map<std::string, std::string> merged = Entries();
  std::map<std::string, std::string> theirs;
  if (ReadEntries(path, &theirs).ok()) {
    for (auto& [key, value] : theirs) merged[key] = std::move(value);
  }
  KILN_RETURN_IF_ERROR(WriteEntries(path, merged));
  std::lock_guard<std::mutex> lock(mu_);
  dirty_ = false;
  return absl::OkStatus();
}

absl::Status TuningCache::Save(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(WriteEntries(path, entries_));
  dirty_ = false;
  return absl::OkStatus();
}

}  // namespace kiln
