#include "kernels/dnn_plans/lrn.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace dnn_plans {

namespace {

// Folds adjacent spatial dims of every descriptor in `ds` (the same fold for all) until the rank
// is at most `max_rank`; across-channel LRN treats every spatial position alike, so the fold
// changes nothing but the count of dims. Unimplemented when the strides do not allow it.
absl::Status FoldSpatialDims(std::initializer_list<dnn::TensorDescriptor*> ds, int max_rank) {
  dnn::TensorDescriptor& first = **ds.begin();
  auto foldable = [](const dnn::TensorDescriptor& d, int i) {
    return d.strides[i] == d.strides[i + 1] * d.dims[i + 1];
  };
  for (int i = first.rank() - 2; i >= 2 && first.rank() > max_rank; --i) {
    bool all = true;
    for (dnn::TensorDescriptor* d : ds) all = all && foldable(*d, i);
    if (!all) continue;
    for (dnn::TensorDescriptor* d : ds) {
      d->dims[i] *= d->dims[i + 1];
      d->strides[i] = d->strides[i + 1];
      d->dims.erase(d->dims.begin() + i + 1);
      d->strides.erase(d->strides.begin() + i + 1);
    }
  }
  if (first.rank() <= max_rank) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "LRN: ", first.ToString(), " has more than 3 spatial dims that its strides cannot fold"));
}

}  // namespace

absl::StatusOr<LrnPlan> PlanLrn(const Node& node, const OperandTypes& types) {
  const std::string& region = node.GetString("region");
  if (region != "across_channels" && region != "within_channel") {
    return absl::InvalidArgumentError(absl::StrCat("LRN: region '", region, "'"));
  }
  const bool across = region == "across_channels";
  const bool backward = node.kind() == OpKind::kLRNGradient;
  LrnPlan p;
  absl::StatusOr<dnn::LrnDescriptor> lrn = dnn::LrnDescriptor::Create(
      across ? dnn::LrnMode::kAcrossChannels : dnn::LrnMode::kWithinChannel,
      node.GetInt("local_size"), node.GetFloat("alpha"), node.GetFloat("beta"), node.GetFloat("k"));
  if (!lrn.ok()) {
    // The op allows what the primitive refuses (windows past 63, a scale that may reach 0).
    return absl::UnimplementedError(absl::StrCat("LRN: ", lrn.status().message()));
  }
  p.lrn = *lrn;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(types.in[0]));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(backward ? types.in[1] : types.out[0]));
  // dx has x's shape; the forward plans it as x so that one fold serves all three.
  KILN_ASSIGN_OR_RETURN(p.dxd, DescriptorOf(backward ? types.out[0] : types.in[0]));
  if (across && p.xd.rank() == 2) {
    // The primitive wants a spatial dim; [N, C] is [N, C, 1].
    for (dnn::TensorDescriptor* d : {&p.xd, &p.yd, &p.dxd}) {
      KILN_ASSIGN_OR_RETURN(*d, WithUnitDim(*d, 2));
    }
  }
  if (across) KILN_RETURN_IF_ERROR(FoldSpatialDims({&p.xd, &p.yd, &p.dxd}, 5));
  if (p.xd.rank() < 3 || p.xd.rank() > 5) {
    return absl::UnimplementedError(
        absl::StrCat("LRN: ", region, " needs 1 to 3 spatial dims, input is ", p.xd.ToString()));
  }
  return p;
}

}  // namespace dnn_plans
}  // namespace kiln
