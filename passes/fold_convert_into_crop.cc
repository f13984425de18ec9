// A Convert reading a Crop that nothing else reads becomes part of the Crop: the Crop copies its
// window straight into the Convert's dtype and memory order, one pass instead of two. FCN-8s's
// last layers in a 16-bit channels-last plan are the case: the upsampled scores are cropped
// (f16, NHWC) and then converted to the graph output's f32 NCHW; on the H100 the two passes
// took 0.084 and 0.100 ms of the plan's 4.71 (docs/PERF.md). Runs on the plan's own graph,
// after the precision and layout rewrite that puts the Converts there.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class FoldConvertIntoCropPass : public Pass {
 public:
  absl::string_view name() const override { return "fold_convert_into_crop"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* convert = graph.FindNode(node_name);
      if (convert == nullptr || convert->kind() != OpKind::kConvert) continue;
      Node* crop = convert->input(0).node;
      if (crop->kind() != OpKind::kCrop) continue;
      if (SoleConsumer(graph, crop->output(0)) != convert) {
        context.Explain(name(), *crop, *convert,
                        "the Crop's output has other readers (or is a graph output)");
        continue;
      }
      const TensorType& converted = convert->output_types()[0];
      AttrMap attrs = crop->attrs();
      attrs["dtype"] = AttrValue(std::string(DataTypeName(converted.dtype())));
      KILN_ASSIGN_OR_RETURN(Node * fused, graph.AddNode("Crop", UniqueName(graph, crop->name()),
                                                        crop->inputs(), attrs));
      // The Convert's memory order: the Crop infers its input's, and writes any strides.
      if (fused->output_types()[0] != converted) {
        KILN_RETURN_IF_ERROR(graph.SetOutputStrides(fused, 0, converted.strides()));
      }
      const std::string final_name = crop->name();
      KILN_RETURN_IF_ERROR(
          FinishFusion(graph, convert->output(0), fused, final_name, {crop, convert}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldConvertIntoCropPass() {
  return std::make_unique<FoldConvertIntoCropPass>();
}

}  // namespace kiln
