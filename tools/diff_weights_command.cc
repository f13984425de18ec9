#include "tools/diff_weights_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "tools/command_line.h"

namespace kiln {

namespace {

std::vector<double> Values(const caffe::BlobProto& blob) {
  if (blob.double_data_size() > 0) return {blob.double_data().begin(), blob.double_data().end()};
  return {blob.data().begin(), blob.data().end()};
}

// Layers that carry blobs, by name, in file order.
std::map<std::string, const caffe::LayerParameter*> WithBlobs(const caffe::NetParameter& net) {
  std::map<std::string, const caffe::LayerParameter*> out;
  for (const caffe::LayerParameter& l : net.layer()) {
    if (l.blobs_size() > 0) out[l.name()] = &l;
  }
  return out;
}

}  // namespace

absl::StatusOr<WeightsDiff> DiffWeights(const caffe::NetParameter& a,
                                        const caffe::NetParameter& b) {
  const auto la = WithBlobs(a), lb = WithBlobs(b);
  if (la.empty()) return absl::InvalidArgumentError("diff-weights: the first net has no blobs");
  for (const auto& [name, layer] : lb) {
    if (la.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("diff-weights: layer '", name, "' has blobs only in the second net"));
    }
  }
  WeightsDiff d;
  for (const auto& [name, layer] : la) {
    auto other = lb.find(name);
    if (other == lb.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("diff-weights: layer '", name, "' has blobs only in the first net"));
    }
    if (layer->blobs_size() != other->second->blobs_size()) {
      return absl::InvalidArgumentError(absl::StrCat("diff-weights: layer '", name, "' has ",
                                                     layer->blobs_size(), " blobs against ",
                                                     other->second->blobs_size()));
    }
    for (int i = 0; i < layer->blobs_size(); ++i) {
      const std::vector<double> x = Values(layer->blobs(i));
      const std::vector<double> y = Values(other->second->blobs(i));
      if (x.size() != y.size()) {
        return absl::InvalidArgumentError(absl::StrCat("diff-weights: layer '", name, "' blob ", i,
                                                       " has ", x.size(), " values against ",
                                                       y.size()));
      }
      double abs = 0, rel = 0, mixed = 0;
      for (size_t e = 0; e < x.size(); ++e) {
        const double diff = std::fabs(x[e] - y[e]);
        if (std::isnan(diff)) {
          abs = rel = mixed = std::numeric_limits<double>::infinity();
          break;
        }
        const double scale = std::max(std::fabs(x[e]), std::fabs(y[e]));
        abs = std::max(abs, diff);
        if (scale > 0) rel = std::max(rel, diff / scale);
        mixed = std::max(mixed, diff / (1 + std::fabs(y[e])));
      }
      const std::string where = absl::StrCat(name, "/", i);
      absl::StrAppend(&d.report,
                      absl::StrFormat("  %-28s %9zu values  max abs %.3g  max rel %.3g\n", where,
                                      x.size(), abs, rel));
      ++d.blobs;
      d.elements += static_cast<int64_t>(x.size());
      d.max_abs = std::max(d.max_abs, abs);
      d.max_rel = std::max(d.max_rel, rel);
      if (mixed > d.max_mixed || d.worst.empty()) {
        d.max_mixed = std::max(d.max_mixed, mixed);
        d.worst = where;
      }
    }
  }
  return d;
}

int DiffWeightsCommand(int argc, char** argv) {
  auto run = [&]() -> absl::StatusOr<bool> {
    KILN_ASSIGN_OR_RETURN(
        CommandLine line,
        CommandLine::Parse(argc, argv, 2, {"weights", "against", "tolerance"}, {"quiet"}));
    if (!line.Has("weights") || !line.Has("against")) {
      return absl::InvalidArgumentError(
          "diff-weights: --weights A.caffemodel and --against B.caffemodel are required");
    }
    double tolerance = -1;
    if (line.Has("tolerance") &&
        (!absl::SimpleAtod(line.Get("tolerance"), &tolerance) || !(tolerance >= 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "diff-weights: --tolerance ", line.Get("tolerance"), ": expected a number >= 0"));
    }
    KILN_ASSIGN_OR_RETURN(caffe::NetParameter a, ReadNetParameter(line.Get("weights")));
    KILN_ASSIGN_OR_RETURN(caffe::NetParameter b, ReadNetParameter(line.Get("against")));
    KILN_ASSIGN_OR_RETURN(WeightsDiff d, DiffWeights(a, b));
    if (!line.Has("quiet")) std::printf("%s", d.report.c_str());
    std::printf(
        "diff-weights: %d blobs, %lld values: max abs %.3g, max rel %.3g, max |a-b|/(1+|b|) %.3g "
        "(%s)",
        d.blobs, static_cast<long long>(d.elements), d.max_abs, d.max_rel, d.max_mixed,
        d.worst.c_str());
    const bool ok = tolerance < 0 || d.max_mixed <= tolerance;
    if (tolerance >= 0) std::printf(" %s tolerance %g", ok ? "within" : "OVER", tolerance);
    std::printf("\n");
    return ok;
  };
  absl::StatusOr<bool> ok = run();
  if (!ok.ok()) {
    std::fprintf(stderr, "kiln diff-weights: %s\n", ok.status().ToString().c_str());
    return ok.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return *ok ? 0 : 1;
}

}  // namespace kiln
