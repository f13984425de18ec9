#include "frontends/caffe/solver.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/upgrade.h"

namespace kiln {

namespace {

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("solver: ", what));
}

absl::StatusOr<caffe::NetParameter> ReadNetRelative(const std::string& written,
                                                    const std::string& folder, const char* field) {
  const std::string path =
      !written.empty() && written[0] == '/' ? written : absl::StrCat(folder, "/", written);
  absl::StatusOr<caffe::NetParameter> net = ReadNetParameter(path);
  if (absl::IsNotFound(net.status())) {
    return absl::NotFoundError(
        absl::StrCat("solver: ", field, " \"", written, "\" not found (tried ", path, ")"));
  }
  if (!net.ok()) return Annotate(net.status(), absl::StrCat("solver: ", field));
  return net;
}

absl::Status CheckSchedule(const caffe::SolverParameter& p) {
  static const std::set<std::string> kTypes = {"SGD",     "Nesterov", "AdaGrad",
                                               "RMSProp", "AdaDelta", "Adam"};
  if (!kTypes.count(p.type())) {
    return absl::UnimplementedError(absl::StrCat("solver: type \"", p.type(),
                                                 "\" is not supported (SGD, Nesterov, AdaGrad, "
                                                 "RMSProp, AdaDelta, Adam)"));
  }
  if (!p.has_lr_policy()) return Bad("lr_policy missing");
  const std::string& policy = p.lr_policy();
  if (policy == "step") {
    if (p.stepsize() <= 0) return Bad("lr_policy \"step\" needs stepsize > 0");
  } else if (policy == "multistep") {
    if (p.stepvalue_size() == 0) return Bad("lr_policy \"multistep\" needs stepvalue");
    for (int i = 1; i < p.stepvalue_size(); ++i) {
      if (p.stepvalue(i) <= p.stepvalue(i - 1)) return Bad("stepvalue must increase");
    }
  } else if (policy == "poly") {
    if (p.max_iter() <= 0) return Bad("lr_policy \"poly\" needs max_iter > 0");
  } else if (policy != "fixed" && policy != "exp" && policy != "inv" && policy != "sigmoid") {
    return absl::UnimplementedError(absl::StrCat("solver: lr_policy \"", policy,
                                                 "\" is not supported (fixed, step, exp, inv, "
                                                 "multistep, poly, sigmoid)"));
  }
  if (p.regularization_type() != "L1" && p.regularization_type() != "L2") {
    return absl::UnimplementedError(
        absl::StrCat("solver: regularization_type \"", p.regularization_type(), "\""));
  }
  if (p.iter_size() < 1) return Bad("iter_size must be >= 1");
  if (p.type() == "Adam" || p.type() == "RMSProp" || p.type() == "AdaGrad" ||
      p.type() == "AdaDelta") {
    if (p.delta() <= 0) return Bad("delta must be > 0");
  }
  if (p.type() == "RMSProp" && (p.rms_decay() < 0 || p.rms_decay() >= 1)) {
    return Bad("rms_decay must be in [0, 1)");
  }
  return absl::OkStatus();
}

}  // namespace

double SolverConfig::LearningRate(int64_t iter) const { return optimizer.learning_rate.At(iter); }

absl::StatusOr<OptimizerConfig> OptimizerFromSolver(const caffe::SolverParameter& p) {
  static const std::map<std::string, dnn::SolverType> kTypes = {
      {"SGD", dnn::SolverType::kSgd},           {"Nesterov", dnn::SolverType::kNesterov},
      {"AdaGrad", dnn::SolverType::kAdaGrad},   {"RMSProp", dnn::SolverType::kRmsProp},
      {"AdaDelta", dnn::SolverType::kAdaDelta}, {"Adam", dnn::SolverType::kAdam}};
  static const std::map<std::string, LrPolicy> kPolicies = {{"fixed", LrPolicy::kFixed},
                                                            {"step", LrPolicy::kStep},
                                                            {"exp", LrPolicy::kExp},
                                                            {"inv", LrPolicy::kInv},
                                                            {"multistep", LrPolicy::kMultiStep},
                                                            {"poly", LrPolicy::kPoly},
                                                            {"sigmoid", LrPolicy::kSigmoid}};
  OptimizerConfig c;
  auto type = kTypes.find(p.type());
  if (type == kTypes.end()) {
    return absl::UnimplementedError(absl::StrCat("solver: type '", p.type(), "'"));
  }
  c.type = type->second;
  LearningRateSchedule& lr = c.learning_rate;
  auto policy = kPolicies.find(p.lr_policy());
  if (policy == kPolicies.end()) {
    return absl::UnimplementedError(absl::StrCat("solver: lr_policy '", p.lr_policy(), "'"));
  }
  lr.policy = policy->second;
  lr.base_lr = p.base_lr();
  lr.gamma = p.gamma();
  lr.power = p.power();
  lr.step_size = p.stepsize();
  lr.step_values.assign(p.stepvalue().begin(), p.stepvalue().end());
  lr.max_iter = p.max_iter();
  c.momentum = p.momentum();
  c.momentum2 = p.momentum2();
  c.delta = p.delta();
  c.rms_decay = p.rms_decay();
  c.weight_decay = p.weight_decay();
  c.regularization =
      p.regularization_type() == "L1" ? dnn::Regularization::kL1 : dnn::Regularization::kL2;
  c.clip_gradients = p.clip_gradients();
  c.iter_size = std::max(1, p.iter_size());
  c.average_loss = std::max(1, p.average_loss());
  return c;
}

absl::StatusOr<SolverConfig> ResolveSolver(caffe::SolverParameter param,
                                           const std::string& folder) {
  KILN_RETURN_IF_ERROR(UpgradeSolver(param));
  KILN_RETURN_IF_ERROR(CheckSchedule(param));
  SolverConfig config;
  KILN_ASSIGN_OR_RETURN(config.optimizer, OptimizerFromSolver(param));
  const int train_sources =
      param.has_net() + param.has_net_param() + param.has_train_net() + param.has_train_net_param();
  if (train_sources != 1) {
    return Bad(
        absl::StrCat("exactly one of net, net_param, train_net, train_net_param must be "
                     "given, found ",
                     train_sources));
  }
  // The net that serves train (and possibly test) when given as net/net_param.
  caffe::NetParameter shared_net;
  std::string shared_origin;
  if (param.has_net_param()) {
    shared_net = param.net_param();
    shared_origin = "inline net_param";
  } else if (param.has_net()) {
    KILN_ASSIGN_OR_RETURN(shared_net, ReadNetRelative(param.net(), folder, "net"));
    shared_origin = absl::StrCat(folder, "/", param.net());
  }
  if (param.has_train_net_param()) {
    config.train.net = param.train_net_param();
    config.train.origin = "inline train_net_param";
  } else if (param.has_train_net()) {
    KILN_ASSIGN_OR_RETURN(config.train.net,
                          ReadNetRelative(param.train_net(), folder, "train_net"));
    config.train.origin = absl::StrCat(folder, "/", param.train_net());
  } else {
    config.train.net = shared_net;
    config.train.origin = shared_origin;
  }
  // As in Caffe: the phase default, then the net's own state, then the solver's.
  config.train.state.set_phase(caffe::TRAIN);
  config.train.state.MergeFrom(config.train.net.state());
  if (param.has_train_state()) config.train.state.MergeFrom(param.train_state());

  for (const caffe::NetParameter& net : param.test_net_param()) {
    config.tests.push_back({net, {}, "inline test_net_param", 0});
  }
  for (const std::string& path : param.test_net()) {
    KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, ReadNetRelative(path, folder, "test_net"));
    config.tests.push_back({net, {}, absl::StrCat(folder, "/", path), 0});
  }
  // net/net_param also serve as the test net(s): as many as the remaining test_iter entries.
  const int explicit_tests = static_cast<int>(config.tests.size());
  const int remaining = param.test_iter_size() - explicit_tests;
  if ((param.has_net() || param.has_net_param()) && remaining > 0) {
    for (int i = 0; i < remaining; ++i) config.tests.push_back({shared_net, {}, shared_origin, 0});
  }
  if (param.test_iter_size() != static_cast<int>(config.tests.size())) {
    return Bad(absl::StrCat(config.tests.size(), " test nets but ", param.test_iter_size(),
                            " test_iter values (one per test net)"));
  }
  if (param.test_state_size() > 0 &&
      param.test_state_size() != static_cast<int>(config.tests.size())) {
    return Bad(absl::StrCat(param.test_state_size(), " test_state entries for ",
                            config.tests.size(), " test nets"));
  }
  if (!config.tests.empty() && param.test_interval() <= 0) {
    return Bad("test nets given but test_interval is not > 0");
  }
  for (size_t i = 0; i < config.tests.size(); ++i) {
    caffe::NetState& state = config.tests[i].state;
    state.set_phase(caffe::TEST);
    state.MergeFrom(config.tests[i].net.state());
    if (param.test_state_size() > 0) state.MergeFrom(param.test_state(static_cast<int>(i)));
    config.tests[i].test_iter = param.test_iter(static_cast<int>(i));
  }
  config.param = std::move(param);
  return config;
}

absl::StatusOr<SolverConfig> LoadSolver(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(caffe::SolverParameter param, ReadSolverParameter(path));
  const size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  return ResolveSolver(std::move(param), folder);
}

}  // namespace kiln
