// A Deconvolution read only by a Crop computes only the rows and columns the Crop can keep.
// Raising a Deconvolution's pad by m removes m rows (or columns) from each end of its output and
// leaves the others unchanged (output row o was row o + m before), so the margin the Crop throws
// away on both sides, min(offset, rest), need not be computed; the Crop's offset drops by it.
// FCN-8s is the case: upscore8 upsamples to 568x568 and the score Crop keeps 500x500 at offset
// 31 (6 rows after), so the Deconvolution computes 506x506: 79 % of the work, and of its output
// bytes. The margins are taken per spatial dim; a Crop left with nothing to cut goes too.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/convolution_params.h"
#include "ops/shape_util.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class ShrinkDeconvolutionToCropPass : public Pass {
 public:
  absl::string_view name() const override { return "shrink_deconvolution_to_crop"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* crop = graph.FindNode(node_name);
      if (crop == nullptr || crop->kind() != OpKind::kCrop) continue;
      Node* deconv = crop->input(0).node;
      if (deconv->kind() != OpKind::kDeconvolution) continue;
      if (SoleConsumer(graph, deconv->output(0)) != crop) {
        context.Explain(name(), *deconv, *crop,
                        "the Deconvolution's output has other readers (or is a graph output)");
        continue;
      }
      const TensorType& full = deconv->output_types()[0];
      const TensorType& kept = crop->output_types()[0];
      const int rank = full.rank();
      KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(crop->GetInt("axis"), rank, "Crop axis"));
      KILN_ASSIGN_OR_RETURN(ConvolutionParams params,
                            ConvolutionParams::FromAttrs(deconv->attrs(), rank - 2));
      // Offsets of every dim (0 before the Crop's axis), then each spatial dim's margin.
      const std::vector<int64_t>& given = crop->GetInts("offset");
      std::vector<int64_t> offset(rank, 0);
      for (int d = axis; d < rank; ++d) {
        offset[d] = given.empty() ? 0 : given.size() == 1 ? given[0] : given[d - axis];
      }
      std::vector<int64_t> margin(rank, 0);
      bool any = false;
      for (int d = 2; d < rank; ++d) {
        margin[d] = std::min(offset[d], full.dim(d) - kept.dim(d) - offset[d]);
        any |= margin[d] > 0;
      }
      // Nothing to save (the Crop keeps an edge row or column on every spatial dim); not a
      // missed rewrite, so no remark: a shrunk pair ends here on the group's next round.
      if (!any) continue;
      AttrMap deconv_attrs = deconv->attrs();
      std::vector<int64_t> pad = params.pad;
      for (int d = 2; d < rank; ++d) pad[d - 2] += margin[d];
      deconv_attrs["pad"] = AttrValue(pad);
      KILN_ASSIGN_OR_RETURN(Node * shrunk,
                            graph.AddNode("Deconvolution", UniqueName(graph, deconv->name()),
                                          deconv->inputs(), deconv_attrs));
      const std::string deconv_name = deconv->name();
      const std::vector<std::string> deconv_origins = deconv->origins();
      const std::string shrunk_name = shrunk->name();

      bool identity = shrunk->output_types()[0].dims() == kept.dims() &&
                      crop->output_types()[0] == shrunk->output_types()[0];
      if (identity) {
        // Nothing left to cut: the Deconvolution's output is the Crop's.
        KILN_RETURN_IF_ERROR(
            FinishFusion(graph, crop->output(0), shrunk, deconv_name, {deconv, crop}));
      } else {
        AttrMap crop_attrs = crop->attrs();
        std::vector<int64_t> new_offset;
        for (int d = axis; d < rank; ++d) new_offset.push_back(offset[d] - margin[d]);
        crop_attrs["offset"] = AttrValue(new_offset);
        KILN_ASSIGN_OR_RETURN(Node * recropped,
                              graph.AddNode("Crop", UniqueName(graph, crop->name()),
                                            {shrunk->output(0), crop->input(1)}, crop_attrs));
        if (recropped->output_types()[0] != crop->output_types()[0]) {
          KILN_RETURN_IF_ERROR(
              graph.SetOutputStrides(recropped, 0, crop->output_types()[0].strides()));
        }
        // A copy: FinishFusion removes the old Crop before it renames.
        const std::string crop_name = crop->name();
        KILN_RETURN_IF_ERROR(FinishFusion(graph, crop->output(0), recropped, crop_name, {crop}));
        // The old Deconvolution died with the old Crop; the shrunk one takes its name.
        Node* renamed = graph.FindNode(shrunk_name);
        if (renamed == nullptr) {
          return absl::InternalError(absl::StrCat(name(), ": the shrunk ", deconv_name,
                                                  " vanished with the Crop it feeds"));
        }
        KILN_RETURN_IF_ERROR(graph.RenameNode(renamed, deconv_name));
        graph.SetOrigins(renamed, deconv_origins);
      }
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeShrinkDeconvolutionToCropPass() {
  return std::make_unique<ShrinkDeconvolutionToCropPass>();
}

}  // namespace kiln
