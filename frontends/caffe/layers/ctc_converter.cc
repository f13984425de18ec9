#include "frontends/caffe/layers/ctc_converter.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::Status ConvertCtcLoss(LayerBuilder& b) {
  // The forks' CTC layers take 2 or 3 bottoms (scores, Caffe's cont indicators, targets padded
  // with -1 along T); saying which layout this is beats a shape error further on.
  if (b.layer().bottom_size() != 4) {
    return b.Invalid(absl::StrCat(
        "needs 4 bottoms (activations [T, N, C], labels [N, L], input lengths [N], label lengths "
        "[N]), got ",
        b.layer().bottom_size()));
  }
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::CTCLossParameter& p = b.layer().ctc_loss_param();
  const std::string& reduction = p.reduction();
  if (reduction != "mean" && reduction != "sum") {
    return b.Invalid(absl::StrCat("ctc_loss_param.reduction must be \"mean\" or \"sum\", got \"",
                                  reduction, "\""));
  }
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("CTCLoss", "", b.bottoms(),
                                               {{"blank", int64_t{p.blank_index()}},
                                                {"reduction", reduction},
                                                {"zero_infinity", p.zero_infinity()}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

}  // namespace kiln
