#include "frontends/caffe/layers/shuffle_channel_converter.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::Status ConvertShuffleChannel(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const int64_t group = b.layer().shuffle_channel_param().group();
  const TensorType& x = b.bottoms()[0].type();
  if (x.rank() < 2 || group < 1 || x.dim(1) % group != 0) {
    return b.Invalid(absl::StrCat("shuffle_channel_param.group ", group,
                                  " must be >= 1 and divide the channels of ", x.ToString()));
  }
  KILN_ASSIGN_OR_RETURN(Node * node,
                        b.AddNode("ChannelShuffle", "", {b.bottoms()[0]}, {{"group", group}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

}  // namespace kiln
