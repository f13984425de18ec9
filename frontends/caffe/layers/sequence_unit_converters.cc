// The op's shape rules check what the layers' bottoms must fit (top_k against the axis, the
// gates against c_prev, cont's shape) and name the layer through LayerBuilder::AddNode; the
// converters add only Caffe's own rules the ops do not have.
#include "frontends/caffe/layers/sequence_unit_converters.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::Status ConvertArgMax(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::ArgMaxParameter& p = b.layer().argmax_param();
  // An absent axis is Caffe's flattened form, which an explicit axis never means: the op's
  // attribute is a list of zero or one axis so the two stay apart.
  std::vector<int64_t> axis;
  if (p.has_axis()) axis.push_back(p.axis());
  AttrMap attrs = {{"top_k", int64_t{p.top_k()}}, {"out_max_val", p.out_max_val()}, {"axis", axis}};
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("ArgMax", "", {b.bottoms()[0]}, attrs));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status ConvertLstmUnit(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 3, 3));
  KILN_RETURN_IF_ERROR(NeedTops(b, 2, 2));
  // Caffe's layer is one time step: every bottom's axis 0 is 1. The op would run any T, so a
  // net Caffe refuses is refused here rather than given a meaning.
  const char* const names[] = {"c_prev", "x", "cont"};
  for (int i = 0; i < 3; ++i) {
    const TensorType& t = b.bottoms()[i].type();
    if (t.rank() >= 1 && t.dim(0) != 1) {
      return b.Invalid(
          absl::StrCat(names[i], " ", t.ToString(), " must have axis 0 of size 1 (one time step)"));
    }
  }
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("LSTMUnit", "", b.bottoms(), {}));
  b.SetTops({node->output(0), node->output(1)});
  return absl::OkStatus();
}

}  // namespace kiln
