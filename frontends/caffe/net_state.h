// Caffe's include/exclude rules: which layers of a file belong to a net built for a given phase,
// level and set of stages.
#ifndef KILN_FRONTENDS_CAFFE_NET_STATE_H_
#define KILN_FRONTENDS_CAFFE_NET_STATE_H_

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// True when `state` satisfies every field `rule` sets.
bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule);

// The layers of a V2 `net` that `state` keeps, in file order, with `state` recorded in the
// result. A layer with both include and exclude rules is InvalidArgument.
absl::StatusOr<caffe::NetParameter> FilterNet(const caffe::NetParameter& net,
                                              const caffe::NetState& state);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_NET_STATE_H_
