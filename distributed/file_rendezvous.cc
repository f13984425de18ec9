#include "distributed/file_rendezvous.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kHeader[] = "kiln-rendezvous";
constexpr char kVersion[] = "1";
constexpr auto kPoll = std::chrono::milliseconds(20);

Clock::time_point DeadlineAfter(absl::Duration d) {
  return Clock::now() + std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

// 16 hex digits that differ between processes and calls (OS entropy, the pid, the clock).
std::string NewNonce() {
  std::random_device device;
  uint64_t v = (static_cast<uint64_t>(device()) << 32) ^ device();
  v ^= static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL;
  v ^= static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// NotFound when the file does not exist.
absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || !fs::exists(path)) {
      return absl::NotFoundError(absl::StrCat("rendezvous: ", path, " does not exist"));
    }
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status WriteTemporary(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Creates `path` holding `content` atomically, failing with AlreadyExists when it exists.
absl::Status WriteExclusive(const std::string& path, const std::string& content,
                            const std::string& nonce) {
  const std::string tmp = absl::StrCat(path, ".tmp.", nonce);
  KILN_RETURN_IF_ERROR(WriteTemporary(tmp, content));
  const int linked = link(tmp.c_str(), path.c_str());
  const int error = errno;
  unlink(tmp.c_str());
  if (linked == 0) return absl::OkStatus();
  if (error == EEXIST) return absl::AlreadyExistsError(path);
  return absl::UnavailableError(
      absl::StrCat("rendezvous: cannot create ", path, ": ", std::strerror(error)));
}

// Replaces `path` by `content` atomically.
absl::Status WriteReplace(const std::string& path, const std::string& content,
                          const std::string& nonce) {
  const std::string tmp = absl::StrCat(path, ".tmp.", nonce);
  KILN_RETURN_IF_ERROR(WriteTemporary(tmp, content));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

absl::StatusOr<std::string> Unhex(absl::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return absl::DataLossError("rendezvous: odd-length hex blob");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return absl::DataLossError("rendezvous: malformed hex blob");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// A rank file: "kiln-rendezvous 1 <world size> <nonce>".
struct RankFileContent {
  int world_size = 0;
  std::string nonce;
};

absl::StatusOr<RankFileContent> ParseRankFile(const std::string& path, const std::string& text) {
  std::vector<std::string> words = absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  RankFileContent out;
  if (words.size() != 4 || words[0] != kHeader || words[1] != kVersion ||
      !absl::SimpleAtoi(words[2], &out.world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: ", path, " is not a rank file of this Kiln version"));
  }
  out.nonce = words[3];
  return out;
}

// Rank 0's answer: "kiln-rendezvous 1 <code> <r>=<nonce>...\n<hex blob or message>".
struct Answer {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::map<int, std::string> nonces;
  std::string payload;
};

std::string FormatAnswer(const Answer& a) {
  std::vector<std::string> pairs;
  for (const auto& [rank, nonce] : a.nonces) pairs.push_back(absl::StrCat(rank, "=", nonce));
  return absl::StrCat(kHeader, " ", kVersion, " ", static_cast<int>(a.code), " ",
                      absl::StrJoin(pairs, " "), "\n", a.payload);
}

bool ParseAnswer(const std::string& text, Answer* out) {
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return false;
  std::vector<std::string> words = absl::StrSplit(text.substr(0, newline), ' ', absl::SkipEmpty());
  int code = 0;
  if (words.size() < 3 || words[0] != kHeader || words[1] != kVersion ||
      !absl::SimpleAtoi(words[2], &code) || code < 0 || code > 16) {
    return false;
  }
  out->code = static_cast<absl::StatusCode>(code);
  for (size_t i = 3; i < words.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(words[i], '=');
    int rank = 0;
    if (!absl::SimpleAtoi(kv.first, &rank)) return false;
    out->nonces[rank] = kv.second;
  }
  out->payload = text.substr(newline + 1);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileRendezvous>> FileRendezvous::Open(
    const std::string& path, const RendezvousOptions& options) {
  KILN_RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  const fs::path folder = fs::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: the folder of ", path, " does not exist"));
  }
  if (fs::path(path).filename().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: ", path, " names a folder, not a file"));
  }
  return std::unique_ptr<FileRendezvous>(new FileRendezvous(path, options));
}

std::string FileRendezvous::RankFile(int rank) const { return absl::StrCat(path_, ".rank", rank); }

absl::StatusOr<std::string> FileRendezvous::ShareFromRankZero(const std::string& blob) {
  if (options_.rank == 0 && blob.size() > kMaxRendezvousBlobBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: the blob has ", blob.size(),
                                                   " bytes; at most ", kMaxRendezvousBlobBytes));
  }
  const std::string nonce = NewNonce();
  const std::string mine = RankFile(options_.rank);
  absl::Status created = WriteExclusive(
      mine, absl::StrCat(kHeader, " ", kVersion, " ", options_.world_size, " ", nonce, "\n"),
      nonce);
  if (absl::IsAlreadyExists(created)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "rendezvous: ", mine, " exists: another process claims rank ", options_.rank,
        ", or an earlier run left it behind (remove ", path_, ".rank* or use a fresh path)"));
  }
  KILN_RETURN_IF_ERROR(created);
  absl::StatusOr<std::string> result = options_.rank == 0 ? Serve(blob, nonce) : Join(nonce);
  unlink(mine.c_str());  // for the other ranks: "I have read the answer"
  return result;
}

absl::StatusOr<std::string> FileRendezvous::Serve(const std::string& blob,
                                                  const std::string& nonce) {
  const int world = options_.world_size;
  const Clock::time_point deadline = DeadlineAfter(options_.timeout);
  Answer answer;
  answer.nonces[0] = nonce;
  absl::Status error;
  const std::string base = fs::path(path_).filename().string() + ".rank";
  const fs::path folder =
      fs::path(path_).parent_path().empty() ? fs::path(".") : fs::path(path_).parent_path();
  while (error.ok() && static_cast<int>(answer.nonces.size()) < world) {
    for (int r = 1; r < world && error.ok(); ++r) {
      if (answer.nonces.count(r)) continue;
      absl::StatusOr<std::string> text = ReadWhole(RankFile(r));
      if (absl::IsNotFound(text.status())) continue;
      if (!text.ok()) {
        error = text.status();
        break;
      }
      absl::StatusOr<RankFileContent> content = ParseRankFile(RankFile(r), *text);
      if (!content.ok()) {
        error = content.status();
        break;
      }
      answer.nonces[r] = content->nonce;
      if (content->world_size != world) {
        error = absl::InvalidArgumentError(
            absl::StrCat("rendezvous: rank ", r, " says the world size is ", content->world_size,
                         "; rank 0 says ", world));
      }
    }
    // A rank file beyond the world: a rank started with a larger world size.
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
      if (!error.ok()) break;
      const std::string name = entry.path().filename().string();
      int rank = 0;
      if (name.compare(0, base.size(), base) == 0 &&
          absl::SimpleAtoi(name.substr(base.size()), &rank) && rank >= world) {
        absl::StatusOr<std::string> text = ReadWhole(entry.path().string());
        if (text.ok()) {
          absl::StatusOr<RankFileContent> content = ParseRankFile(name, *text);
          if (content.ok()) answer.nonces[rank] = content->nonce;
        }
        error =
            absl::InvalidArgumentError(absl::StrCat("rendezvous: rank ", rank, " joined ", path_,
                                                    ", but rank 0's world has ", world, " ranks"));
      }
    }
    if (!error.ok() || static_cast<int>(answer.nonces.size()) == world) break;
    if (Clock::now() > deadline) {
      std::vector<int> missing;
      for (int r = 1; r < world; ++r) {
        if (!answer.nonces.count(r)) missing.push_back(r);
      }
      error = absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: rank 0 waited ", absl::FormatDuration(options_.timeout), " at ", path_, "; ",
          answer.nonces.size(), " of ", world, " ranks joined, missing rank",
          missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", ")));
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  answer.code = error.code();
  answer.payload = error.ok() ? Hex(blob) : std::string(error.message());
  KILN_RETURN_IF_ERROR(WriteReplace(path_, FormatAnswer(answer), nonce));
  if (!error.ok()) return error;  // the answer stays: the ranks that joined read the error
  // Every other rank removes its file once it has read the answer.
  const Clock::time_point read_deadline = DeadlineAfter(options_.timeout);
  while (true) {
    std::vector<int> unread;
    for (int r = 1; r < world; ++r) {
      if (fs::exists(RankFile(r))) unread.push_back(r);
    }
    if (unread.empty()) break;
    if (Clock::now() > read_deadline) {
      unlink(path_.c_str());
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: rank", unread.size() == 1 ? " " : "s ",
                       absl::StrJoin(unread, ", "), " did not read rank 0's answer in ", path_,
                       " within ", absl::FormatDuration(options_.timeout)));
    }
    std::this_thread::sleep_for(kPoll);
  }
  unlink(path_.c_str());
  return blob;
}

absl::StatusOr<std::string> FileRendezvous::Join(const std::string& nonce) {
  const Clock::time_point deadline = DeadlineAfter(options_.timeout);
  const int rank = options_.rank;
  while (true) {
    absl::StatusOr<std::string> text = ReadWhole(path_);
    Answer answer;
    if (text.ok() && ParseAnswer(*text, &answer)) {
      auto mine = answer.nonces.find(rank);
      if (mine != answer.nonces.end() && mine->second == nonce) {
        if (answer.code != absl::StatusCode::kOk) {
          return absl::Status(answer.code,
                              absl::StrCat("rendezvous: rank ", rank,
                                           " was turned away by rank 0: ", answer.payload));
        }
        return Unhex(answer.payload);
      }
    }
    if (!fs::exists(RankFile(rank))) {
      return absl::AbortedError(absl::StrCat("rendezvous: ", RankFile(rank),
                                             " was removed by another process before rank 0 "
                                             "answered"));
    }
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: rank ", rank, " got no answer from rank 0 in ", path_, " within ",
          absl::FormatDuration(options_.timeout), " (is rank 0 running with the same path?)"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace kiln
