// A graph pass: a named rewrite of a Graph in place. Passes say whether they changed anything,
// so the PassManager can verify only after real changes and run groups to a fixed point. A
// pass that declines a rewrite records why (PassContext::Explain), so `kiln dump --why-not-fused`
// can show every "no".
#ifndef KILN_PASSES_PASS_H_
#define KILN_PASSES_PASS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph.h"

namespace kiln {

// One declined rewrite: which pass, which nodes, and the legality or profitability reason.
struct PassRemark {
  std::string pass;
  std::string producer;  // the node a fusion would have absorbed into
  std::string consumer;  // the node it would have absorbed
  std::string reason;
};

// What the passes may assume about the compiled program.
struct PassContext {
  // Inference: Dropout is the identity, BatchNorm uses its stored statistics, nothing needs the
  // intermediate values for a gradient. Training plans (issue 17) run a different pipeline.
  bool inference = true;
  // Declined rewrites land here when not null (the CLI's --why-not-fused).
  std::vector<PassRemark>* remarks = nullptr;

  void Explain(absl::string_view pass, const Node& producer, const Node& consumer,
               absl::string_view reason) const;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual absl::string_view name() const = 0;
  // Rewrites `graph`; true when it changed anything. A failure leaves the graph unspecified.
  virtual absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) = 0;
};

}  // namespace kiln

#endif  // KILN_PASSES_PASS_H_
