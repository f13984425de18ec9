// Find results remembered per problem (direction + ConvProblem::Key()), saved to and loaded from
// a text file so a later process skips the search: one line per result,
// `direction<TAB>key<TAB>algorithm<TAB>time_ms<TAB>workspace_bytes<TAB>deterministic`.
#ifndef KILN_DNN_CUDA_CONV_CONV_ALGORITHM_CACHE_H_
#define KILN_DNN_CUDA_CONV_CONV_ALGORITHM_CACHE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "dnn/cuda/conv/convolution.h"

namespace kiln {
namespace dnn {

class ConvAlgorithmCache {
 public:
  // The cached results for the problem (fastest first), or null.
  const std::vector<ConvAlgoPerf>* Lookup(ConvDirection direction, const ConvProblem& p) const;
  // Remembers the successful results of a Find (replacing earlier ones for the same problem).
  void Insert(ConvDirection direction, const ConvProblem& p,
              const std::vector<ConvAlgoPerf>& results);
  size_t size() const { return entries_.size(); }

  // Writes the cache atomically (temporary file + rename).
  absl::Status Save(const std::string& path) const;
  // Adds the entries of a saved file; InvalidArgument naming the line for malformed content.
  absl::Status Load(const std::string& path);

 private:
  std::map<std::pair<std::string, std::string>, std::vector<ConvAlgoPerf>> entries_;
};

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_ALGORITHM_CACHE_H_
