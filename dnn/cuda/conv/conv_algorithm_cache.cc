#include "dnn/cuda/conv/conv_algorithm_cache.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace dnn {

namespace {

absl::StatusOr<ConvDirection> ParseDirection(absl::string_view s) {
  for (ConvDirection d :
       {ConvDirection::kForward, ConvDirection::kBackwardData, ConvDirection::kBackwardFilter})
    if (ConvDirectionName(d) == s) return d;
  return absl::InvalidArgumentError(absl::StrCat("unknown direction '", s, "'"));
}

}  // namespace

const std::vector<ConvAlgoPerf>* ConvAlgorithmCache::Lookup(ConvDirection direction,
                                                            const ConvProblem& p) const {
  auto it = entries_.find({std::string(ConvDirectionName(direction)), p.Key()});
  return it == entries_.end() ? nullptr : &it->second;
}

void ConvAlgorithmCache::Insert(ConvDirection direction, const ConvProblem& p,
                                const std::vector<ConvAlgoPerf>& results) {
  std::vector<ConvAlgoPerf> ok;
  for (const ConvAlgoPerf& r : results)
    if (r.status.ok()) ok.push_back(r);
  entries_[{std::string(ConvDirectionName(direction)), p.Key()}] = std::move(ok);
}

absl::Status ConvAlgorithmCache::Save(const std::string& path) const {
  std::ostringstream text;
  for (const auto& [key, results] : entries_)
    for (const ConvAlgoPerf& r : results)
      text << key.first << '\t' << key.second << '\t' << ConvAlgoName(r.algo) << '\t' << r.time_ms
           << '\t' << r.workspace_bytes << '\t' << (r.deterministic ? 1 : 0) << '\n';
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text.str();
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat("algorithm cache: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("algorithm cache: cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status ConvAlgorithmCache::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("algorithm cache: cannot open ", path));
  std::map<std::pair<std::string, std::string>, std::vector<ConvAlgoPerf>> loaded;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithm cache ", path, ":", number, ": ", why));
    };
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 6) return bad(absl::StrCat(f.size(), " fields (want 6)"));
    absl::StatusOr<ConvDirection> direction = ParseDirection(f[0]);
    if (!direction.ok()) return bad(direction.status().message());
    absl::StatusOr<ConvAlgo> algo = ParseConvAlgo(f[2]);
    if (!algo.ok()) return bad(algo.status().message());
    ConvAlgoPerf perf;
    perf.algo = *algo;
    uint64_t bytes = 0;
    int det = 0;
    if (!absl::SimpleAtof(f[3], &perf.time_ms)) return bad("time is not a number");
    if (!absl::SimpleAtoi(f[4], &bytes)) return bad("workspace is not a number");
    if (!absl::SimpleAtoi(f[5], &det) || (det != 0 && det != 1))
      return bad("deterministic is not 0/1");
    if (f[1].empty()) return bad("empty problem key");
    perf.workspace_bytes = bytes;
    perf.deterministic = det == 1;
    loaded[{f[0], f[1]}].push_back(perf);
  }
  for (auto& [key, results] : loaded) entries_[key] = std::move(results);
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
