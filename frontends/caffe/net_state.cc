#include "frontends/caffe/net_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

bool HasStage(const caffe::NetState& state, const std::string& stage) {
  return std::find(state.stage().begin(), state.stage().end(), stage) != state.stage().end();
}

}  // namespace

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const std::string& stage : rule.stage()) {
    if (!HasStage(state, stage)) return false;
  }
  for (const std::string& stage : rule.not_stage()) {
    if (HasStage(state, stage)) return false;
  }
  return true;
}

absl::StatusOr<caffe::NetParameter> FilterNet(const caffe::NetParameter& net,
                                              const caffe::NetState& state) {
  caffe::NetParameter filtered = net;
  filtered.clear_layer();
  *filtered.mutable_state() = state;
  for (const caffe::LayerParameter& layer : net.layer()) {
    if (layer.include_size() > 0 && layer.exclude_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name(), "' (", layer.type(),
                                                     "): has both include and exclude rules"));
    }
    bool keep = layer.include_size() == 0;
    for (const caffe::NetStateRule& rule : layer.exclude()) {
      if (StateMeetsRule(state, rule)) keep = false;
    }
    for (const caffe::NetStateRule& rule : layer.include()) {
      if (StateMeetsRule(state, rule)) keep = true;
    }
    if (keep) *filtered.add_layer() = layer;
  }
  return filtered;
}

}  // namespace kiln
