// The reports of the public API on the CPU: kiln_engine_report_json (steps, declined rewrites,
// memory plan) parsed as JSON, the graphviz and arena texts, kiln_context_time, and the
// workspace and tuning-file compile options; for a small built graph and for LeNet.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.hpp"
#include "tests/util/caffe_files.h"

namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// `json` parsed by protobuf's JSON parser (a JSON object as a google.protobuf.Struct).
Struct Parse(const std::string& json) {
  Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json.substr(0, 2000);
  return parsed;
}

const Value& Field(const Struct& s, const std::string& name) {
  static const Value* const kMissing = new Value;
  auto it = s.fields().find(name);
  EXPECT_NE(it, s.fields().end()) << "no \"" << name << "\"";
  return it == s.fields().end() ? *kMissing : it->second;
}
double Number(const Struct& s, const std::string& name) { return Field(s, name).number_value(); }
std::string String(const Struct& s, const std::string& name) {
  return Field(s, name).string_value();
}
const ListValue& List(const Struct& s, const std::string& name) {
  return Field(s, name).list_value();
}
std::vector<std::string> Strings(const ListValue& list) {
  std::vector<std::string> out;
  for (const Value& v : list.values()) out.push_back(v.string_value());
  return out;
}

// The steps of a plan as kiln_engine_describe counts them ("..., 9 steps, ...").
int DescribedSteps(const kiln::Engine& engine) {
  const std::string d = engine.Describe();
  const size_t at = d.find(" steps");
  const size_t from = d.rfind(", ", at);
  return at == std::string::npos || from == std::string::npos
             ? -1
             : std::stoi(d.substr(from + 2, at - from - 2));
}

// What every report must say, whatever the network: one entry per plan step, in order, each
// naming its source layers; declined rewrites as records; buffers inside the arena, each live
// from its first step to its last, and planned memory within the naive count.
void CheckReport(const kiln::Engine& engine, const Struct& report) {
  EXPECT_EQ(String(report, "backend"), "cpu");
  EXPECT_EQ(String(report, "device"), "cpu");
  EXPECT_FALSE(String(report, "precision").empty());
  EXPECT_FALSE(String(report, "layout").empty());
  const ListValue& steps = List(report, "steps");
  ASSERT_GT(steps.values_size(), 0);
  EXPECT_EQ(steps.values_size(), DescribedSteps(engine)) << engine.Describe();
  for (int i = 0; i < steps.values_size(); ++i) {
    const Struct& step = steps.values(i).struct_value();
    SCOPED_TRACE("step " + std::to_string(i) + " " + String(step, "name"));
    EXPECT_EQ(Number(step, "index"), i);
    EXPECT_FALSE(String(step, "name").empty());
    EXPECT_FALSE(String(step, "kernel").empty());
    EXPECT_FALSE(String(step, "op").empty());
    EXPECT_GE(List(step, "layers").values_size(), 1);
    EXPECT_GE(Number(step, "workspace_bytes"), 0);
    EXPECT_TRUE(Field(step, "view").has_bool_value());
    EXPECT_TRUE(Field(step, "in_place").has_bool_value());
  }
  for (const Value& v : List(report, "why_not_fused").values()) {
    const Struct& r = v.struct_value();
    for (const char* key : {"pass", "producer", "consumer", "reason"}) {
      EXPECT_FALSE(String(r, key).empty()) << key;
    }
  }
  const Struct& memory = Field(report, "memory").struct_value();
  const double arena = Number(memory, "arena_bytes");
  const double planned = Number(memory, "planned_activation_bytes");
  const double naive = Number(memory, "naive_activation_bytes");
  EXPECT_GT(planned, 0);
  EXPECT_LE(planned, arena);
  EXPECT_LE(arena, naive) << "planned " << planned;
  EXPECT_EQ(Number(memory, "weights_bytes"), engine.WeightsBytes());
  const ListValue& buffers = List(memory, "buffers");
  ASSERT_GT(buffers.values_size(), 0);
  for (const Value& v : buffers.values()) {
    const Struct& b = v.struct_value();
    SCOPED_TRACE("buffer " + String(b, "name"));
    EXPECT_FALSE(String(b, "name").empty());
    EXPECT_GE(Number(b, "first_step"), -1);
    EXPECT_LE(Number(b, "first_step"), Number(b, "last_step"));
    EXPECT_LE(Number(b, "last_step"), steps.values_size());
    EXPECT_GE(Number(b, "offset"), 0);
    EXPECT_GT(Number(b, "bytes"), 0);
    EXPECT_LE(Number(b, "offset") + Number(b, "bytes"), arena);
  }
}

// Every source layer (or graph node) some step covers.
std::set<std::string> Covered(const Struct& report) {
  std::set<std::string> covered;
  for (const Value& v : List(report, "steps").values()) {
    for (const std::string& l : Strings(List(v.struct_value(), "layers"))) covered.insert(l);
  }
  return covered;
}

// Whether one step covers exactly `layers`, in that order.
bool AStepCovers(const Struct& report, const std::vector<std::string>& layers) {
  for (const Value& v : List(report, "steps").values()) {
    if (Strings(List(v.struct_value(), "layers")) == layers) return true;
  }
  return false;
}

// The declined rewrite `producer -> consumer`, or null.
const Struct* Declined(const Struct& report, const std::string& producer,
                       const std::string& consumer) {
  for (const Value& v : List(report, "why_not_fused").values()) {
    const Struct& r = v.struct_value();
    if (String(r, "producer") == producer && String(r, "consumer") == consumer) return &r;
  }
  return nullptr;
}

// `result` failed with `code` and a message containing `text`.
template <typename T>
void ExpectRefused(const kiln::Result<T>& result, kiln_status code, const std::string& text) {
  ASSERT_FALSE(result.ok()) << "expected " << kiln_status_name(code) << ": " << text;
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status().message();
}

// The bytes of `engine` saved as a plan file named `name` in the scratch folder.
std::string SavedPlan(const kiln::Engine& engine, const std::string& name) {
  const std::string path = kiln::ScratchFile(name);
  std::remove(path.c_str());
  kiln::Status saved = engine.Save(path);
  EXPECT_TRUE(saved.ok()) << saved.ToString();
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
  return v;
}

// ResNet's projection block, small: a 1x1 shortcut convolution (branch1) beside two 3x3
// convolutions (branch2a with its ReLU, branch2b), their sum and its ReLU, then a pooling and a
// classifier. Fused, branch2b takes the sum and the ReLU with branch1 as its residual, so
// branch1's own epilogue is declined (as res2a_branch1 -> res2a_branch2b in ResNet-18).
kiln::Result<kiln::Graph> ProjectionBlock() {
  auto g = kiln::Graph::Create();
  if (!g.ok()) return g.status();
  auto x = g->Input("image", {2, 3, 8, 8});
  auto w1 = g->Constant("branch1.w", {4, 3, 1, 1}, Ramp(12));
  auto w2a = g->Constant("branch2a.w", {4, 3, 3, 3}, Ramp(108));
  auto w2b = g->Constant("branch2b.w", {4, 4, 3, 3}, Ramp(144));
  auto fc = g->Constant("fc.w", {5, 64}, Ramp(320));
  if (!x.ok() || !w1.ok() || !w2a.ok() || !w2b.ok() || !fc.ok()) {
    return kiln::Status(KILN_INTERNAL, "ProjectionBlock: a constant or the input failed");
  }
  kiln::ConvolutionOptions same;
  same.pad = {1};
  auto b1 = g->Convolution(*x, *w1, nullptr, {}, "branch1");
  auto b2a = g->Convolution(*x, *w2a, nullptr, same, "branch2a");
  if (!b1.ok() || !b2a.ok()) return kiln::Status(KILN_INTERNAL, "ProjectionBlock: convolutions");
  auto r2a = g->ReLU(*b2a, 0.0, "branch2a_relu");
  if (!r2a.ok()) return r2a.status();
  auto b2b = g->Convolution(*r2a, *w2b, nullptr, same, "branch2b");
  if (!b2b.ok()) return b2b.status();
  auto sum = g->Eltwise({*b1, *b2b}, "sum", {}, "sum");
  if (!sum.ok()) return sum.status();
  auto relu = g->ReLU(*sum, 0.0, "sum_relu");
  if (!relu.ok()) return relu.status();
  kiln::PoolingOptions pool;
  pool.kernel = {2};
  pool.stride = {2};
  auto p = g->Pooling(*relu, pool, "pool");
  if (!p.ok()) return p.status();
  auto logits = g->InnerProduct(*p, *fc, nullptr, 1, "fc");
  if (!logits.ok()) return logits.status();
  auto prob = g->Softmax(*logits, 1, false, "prob");
  if (!prob.ok()) return prob.status();
  kiln::Status out = g->Output("prob", *prob);
  if (!out.ok()) return out;
  return g;
}

kiln::Result<kiln::Engine> BlockEngine(kiln::CompileOptions options = {}) {
  auto graph = ProjectionBlock();
  if (!graph.ok()) return graph.status();
  options.device = "cpu";
  return kiln::Engine::FromGraph(*graph, options);
}

kiln::Result<kiln::Engine> Lenet(kiln::CompileOptions options = {}) {
  options.device = "cpu";
  return kiln::Engine::FromCaffe(kiln::CaffeFile("lenet.prototxt"),
                                 kiln::CaffeFile("lenet_iter_10000.caffemodel"), options);
}

TEST(ReportApiTest, BuiltGraphReportsFusedStepsDeclinedRewritesAndMemory) {
  auto engine = BlockEngine();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::string json = engine->ReportJson();
  const Struct report = Parse(json);
  CheckReport(*engine, report);
  // The steps name the graph's nodes they cover: branch2b with the sum and its ReLU.
  EXPECT_TRUE(AStepCovers(report, {"branch2b", "sum", "sum_relu"})) << json;
  const std::set<std::string> covered = Covered(report);
  for (const char* node : {"branch1", "branch2a", "branch2a_relu", "pool", "fc", "prob"}) {
    EXPECT_EQ(covered.count(node), 1u) << node << " in no step: " << json;
  }
  const Struct* declined = Declined(report, "branch1", "branch2b");
  ASSERT_NE(declined, nullptr) << json;
  EXPECT_EQ(String(*declined, "pass"), "fuse_conv_epilogue");
  EXPECT_NE(String(*declined, "reason").find("the output is the residual"), std::string::npos);
  EXPECT_EQ(String(Field(report, "memory").struct_value(), "naive_kind"), "unshared");

  const std::string dot = engine->GraphDot();
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot.substr(0, 200);
  EXPECT_NE(dot.find("label=\"branch2b + sum + sum_relu\""), std::string::npos) << dot;
  const std::string svg = engine->MemorySvg();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 200);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Owned by the engine: the same text at the same address on every call.
  EXPECT_EQ(kiln_engine_report_json(engine->c_handle()),
            kiln_engine_report_json(engine->c_handle()));
  EXPECT_EQ(kiln_engine_memory_svg(engine->c_handle()), kiln_engine_memory_svg(engine->c_handle()));
}

TEST(ReportApiTest, LenetReportNamesPrototxtLayersAndCaffesMemory) {
  auto engine = Lenet();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::string json = engine->ReportJson();
  const Struct report = Parse(json);
  CheckReport(*engine, report);
  const std::set<std::string> covered = Covered(report);
  for (const char* layer : {"conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "prob"}) {
    EXPECT_EQ(covered.count(layer), 1u) << layer << " in no step: " << json;
  }
  const Struct& memory = Field(report, "memory").struct_value();
  EXPECT_EQ(String(memory, "naive_kind"), "caffe");
  EXPECT_LT(Number(memory, "planned_activation_bytes"), Number(memory, "naive_activation_bytes"));
  // A convolution followed by a pooling keeps its pooling apart, with the reason.
  const Struct* declined = Declined(report, "conv1", "pool1");
  ASSERT_NE(declined, nullptr) << json;
  EXPECT_EQ(String(*declined, "pass"), "fuse_conv_epilogue");
  EXPECT_NE(String(*declined, "reason").find("Pooling"), std::string::npos);
  // conv1 runs in bands of rows (split_rows_for_memory), each a step of layer conv1 with its
  // im2col columns as workspace in the arena.
  int conv1_bands = 0;
  for (const Value& v : List(report, "steps").values()) {
    const Struct& step = v.struct_value();
    if (String(step, "op") != "Convolution" ||
        Strings(List(step, "layers")) != std::vector<std::string>{"conv1"}) {
      continue;
    }
    ++conv1_bands;
    EXPECT_EQ(String(step, "name").rfind("conv1/rows", 0), 0u) << String(step, "name");
    EXPECT_GT(Number(step, "workspace_bytes"), 0);
    EXPECT_GE(Number(step, "workspace_offset"), 0);
  }
  EXPECT_GT(conv1_bands, 1) << json;
  EXPECT_EQ(engine->GraphDot().rfind("digraph", 0), 0u);
  EXPECT_EQ(engine->MemorySvg().rfind("<svg", 0), 0u);
}

TEST(ReportApiTest, LoadedPlanReportsItsStepsAndDeclinedRewritesToo) {
  auto engine = BlockEngine();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::string path = kiln::ScratchFile("report_block.plan");
  std::remove(path.c_str());
  ASSERT_TRUE(engine->Save(path).ok());
  auto loaded = kiln::Engine::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Struct report = Parse(loaded->ReportJson());
  CheckReport(*loaded, report);
  EXPECT_EQ(List(report, "steps").values_size(),
            List(Parse(engine->ReportJson()), "steps").values_size());
  EXPECT_NE(Declined(report, "branch1", "branch2b"), nullptr);
}

TEST(ReportApiTest, NullEnginesGiveEmptyTextAndSayWhy) {
  using Text = const char* (*)(const kiln_engine*);
  for (const auto& [call, name] : std::vector<std::pair<Text, std::string>>{
           {kiln_engine_report_json, "kiln_engine_report_json"},
           {kiln_engine_graph_dot, "kiln_engine_graph_dot"},
           {kiln_engine_memory_svg, "kiln_engine_memory_svg"}}) {
    const char* text = call(nullptr);
    ASSERT_NE(text, nullptr) << name;
    EXPECT_STREQ(text, "") << name;
    EXPECT_EQ(std::string(kiln_last_error()), name + ": engine is NULL");
  }
  EXPECT_EQ(kiln::Engine().ReportJson(), "");
}

TEST(ReportApiTest, ContextTimeMeasuresTheForwardAndRefusesBadArguments) {
  auto engine = BlockEngine();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto context = engine->CreateContext();
  ASSERT_TRUE(context.ok());
  // No input yet: refused, naming the call and the input.
  auto unset = context->Time(3);
  ExpectRefused(unset, KILN_FAILED_PRECONDITION, "'image'");
  EXPECT_EQ(unset.status().message().rfind("kiln_context_time: ", 0), 0u);
  ASSERT_TRUE(context->SetInput("image", Ramp(2 * 3 * 8 * 8)).ok());
  auto ms = context->Time(5, 1);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  EXPECT_GT(*ms, 0.0);
  EXPECT_LT(*ms, 10000.0);
  // The run before the timing leaves its outputs readable.
  EXPECT_TRUE(context->Output<float>("prob", 10).ok());
  for (const auto& [iterations, warmup] :
       std::vector<std::pair<int, int>>{{0, 3}, {-1, 3}, {5, -1}, {2000000, 0}}) {
    auto bad = context->Time(iterations, warmup);
    SCOPED_TRACE(std::to_string(iterations) + " iterations, warmup " + std::to_string(warmup));
    ExpectRefused(bad, KILN_INVALID_ARGUMENT, "kiln_context_time: ");
  }
  double out = -1;
  EXPECT_EQ(kiln_context_time(nullptr, 5, 0, &out), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error()), "kiln_context_time: context is NULL");
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(engine->c_handle(), &c), KILN_OK);
  EXPECT_EQ(kiln_context_time(c, 5, 0, nullptr), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error()), "kiln_context_time: milliseconds is NULL");
  kiln_context_destroy(c);
}

TEST(ReportApiTest, WorkspaceLimitTakesEffectOrIsRefused) {
  kiln::CompileOptions tight;
  tight.workspace_limit = 1;  // below conv1's im2col columns
  auto refused = Lenet(tight);
  ExpectRefused(refused, KILN_RESOURCE_EXHAUSTED, "over the limit of 1");
  EXPECT_NE(refused.status().message().find("conv1"), std::string::npos);
  kiln::CompileOptions roomy;
  roomy.workspace_limit = int64_t{8} << 20;
  auto engine = Lenet(roomy);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const Struct report = Parse(engine->ReportJson());
  for (const Value& v : List(report, "steps").values()) {
    EXPECT_LE(Number(v.struct_value(), "workspace_bytes"), roomy.workspace_limit);
  }
  // The limit is the plan's: a saved plan keeps it.
  EXPECT_NE(SavedPlan(*engine, "workspace_limit.plan").find("\nworkspace_limit=8388608\n"),
            std::string::npos);
  kiln::CompileOptions negative;
  negative.workspace_limit = -1;
  auto bad = Lenet(negative);
  ExpectRefused(bad, KILN_INVALID_ARGUMENT, "options->workspace_limit is -1");
}

TEST(ReportApiTest, WorkspaceBudgetIsAFactorOfAtLeastOne) {
  kiln::CompileOptions budget;
  budget.workspace_budget = 1.25;
  auto engine = BlockEngine(budget);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  // As --workspace-budget 1.25: a slack of 0.25 over the activations' peak, whatever it costs
  // (a saved plan keeps the options it was compiled with).
  const std::string saved = SavedPlan(*engine, "workspace_budget.plan");
  EXPECT_NE(saved.find("\nworkspace_peak_slack=0.25\n"), std::string::npos);
  EXPECT_NE(saved.find("\nworkspace_budget_max_slowdown=-1\n"), std::string::npos);
  for (double factor : {0.5, -1.0, 2e6}) {
    kiln::CompileOptions bad;
    bad.workspace_budget = factor;
    auto refused = BlockEngine(bad);
    ExpectRefused(refused, KILN_INVALID_ARGUMENT, "options->workspace_budget");
  }
}

TEST(ReportApiTest, TuningFileIsReadWithMeasureOrRefusedWithTheReason) {
  kiln::CompileOptions measure;
  measure.algo = "measure";
  // A folder that does not exist.
  measure.tuning_file = kiln::ScratchFile("no_such_folder/tuning.txt");
  auto missing = BlockEngine(measure);
  ExpectRefused(missing, KILN_NOT_FOUND, "no_such_folder does not exist");
  // Without algo "measure" the file has nothing to hold.
  kiln::CompileOptions heuristic;
  heuristic.tuning_file = kiln::ScratchFile("tuning.txt");
  auto unused = BlockEngine(heuristic);
  ExpectRefused(unused, KILN_INVALID_ARGUMENT, "options->algo \"measure\"");
  // A folder is no file.
  measure.tuning_file = kiln::ScratchFile("");
  auto folder = BlockEngine(measure);
  ExpectRefused(folder, KILN_INVALID_ARGUMENT, "is a folder");
  // A new file in an existing folder is taken. (A CPU plan measures nothing, so the file stays
  // unread and unwritten here; a CUDA compile with algo "measure" reads and writes it.)
  measure.tuning_file = kiln::ScratchFile("fresh_tuning.txt");
  std::remove(measure.tuning_file.c_str());
  auto engine = BlockEngine(measure);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
}

// A program built against the header before these fields passes a shorter struct_size: what
// lies past it is not read (the defaults apply), and max_batch before it still is.
TEST(ReportApiTest, OlderOptionsStructsGetTheDefaultsOfTheNewFields) {
  kiln_compile_options old;
  kiln_compile_options_init(&old);
  old.struct_size = offsetof(kiln_compile_options, workspace_limit);
  old.device = "cpu";
  old.max_batch = 2;
  old.workspace_limit = -7;      // invalid, and past the older struct's end
  old.workspace_budget = 0.25;   // likewise
  old.tuning_file = "/no/such";  // likewise
  kiln_engine* engine = nullptr;
  ASSERT_EQ(
      kiln_engine_from_caffe(kiln::CaffeFile("lenet.prototxt").c_str(),
                             kiln::CaffeFile("lenet_iter_10000.caffemodel").c_str(), &old, &engine),
      KILN_OK)
      << kiln_last_error();
  EXPECT_EQ(kiln_engine_max_batch(engine), 2);
  kiln_engine_destroy(engine);
  // The same fields within the struct are read and refused.
  old.struct_size = sizeof(kiln_compile_options);
  EXPECT_EQ(
      kiln_engine_from_caffe(kiln::CaffeFile("lenet.prototxt").c_str(),
                             kiln::CaffeFile("lenet_iter_10000.caffemodel").c_str(), &old, &engine),
      KILN_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
}

}  // namespace
