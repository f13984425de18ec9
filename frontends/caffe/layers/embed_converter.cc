#include "frontends/caffe/layers/embed_converter.h"

#include <vector>

#include "base/status_macros.h"

namespace kiln {

absl::Status ConvertEmbed(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::EmbedParameter& p = b.layer().embed_param();
  if (!p.has_num_output() || p.num_output() == 0) {
    return b.Invalid("embed_param.num_output missing or 0");
  }
  if (!p.has_input_dim() || p.input_dim() == 0) {
    return b.Invalid("embed_param.input_dim missing or 0");
  }
  const int64_t rows = p.input_dim(), width = p.num_output();
  b.ExpectParams(p.bias_term() ? 2 : 1);
  KILN_ASSIGN_OR_RETURN(Value w, b.Param(0, {rows, width}, p.weight_filler(), true, "weight"));
  std::vector<Value> inputs = {b.bottoms()[0], w};
  if (p.bias_term()) {
    KILN_ASSIGN_OR_RETURN(Value bias, b.Param(1, {width}, p.bias_filler(), true, "bias"));
    inputs.push_back(bias);
  }
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("Embed", "", inputs, {}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

}  // namespace kiln
