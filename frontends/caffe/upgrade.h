// Brings old Caffe files up to the current format the way Caffe itself does, in Caffe's order:
// V0 layers -> V1, data-layer transform fields -> transform_param, V1 layers -> V2, legacy net
// inputs -> an Input layer, BatchNorm param specs -> lr_mult/decay_mult 0. Solver files get the
// solver_type enum -> type string upgrade. Each step is a no-op on files that do not need it.
#ifndef KILN_FRONTENDS_CAFFE_UPGRADE_H_
#define KILN_FRONTENDS_CAFFE_UPGRADE_H_

#include "absl/status/status.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// Upgrades `net` in place to the V2 format (only `layer`, no `layers`, no legacy inputs).
// Fields that an old format has but the upgrade cannot express are Unimplemented naming the
// layer and field; inconsistent files (both `layer` and `layers`, wrong input_dim counts) are
// InvalidArgument.
absl::Status UpgradeNet(caffe::NetParameter& net);

// Upgrades `solver` in place: solver_type -> type, and every inline net.
absl::Status UpgradeSolver(caffe::SolverParameter& solver);

// The V2 type string for a V1 enum value ("" for NONE or values Caffe never had).
const char* V1TypeName(caffe::V1LayerParameter::LayerType type);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_UPGRADE_H_
