// A table of bad (and a few good) `kiln` invocations, each run as the real binary in a fresh copy
// of a small working folder: the exit status, a part of the message, and that every file that was
// there before is byte-identical afterwards (no input lost or overwritten, no partial file left).
// The folder holds tiny models made by the binary itself: a deploy net (2x1x4x4 -> 3 classes) and
// its weights, an unrelated net's weights, an empty .caffemodel, an LMDB of 8 4x4 images, a
// solver over it with snapshot prefix "snap" and max_iter 4, and that solver's snapshot.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/kiln_process.h"

namespace {

namespace fs = std::filesystem;

using kiln::Idx;
using kiln::KilnJob;
using kiln::KilnOutcome;
using kiln::Npy;
using kiln::Put;
using kiln::RunKiln;
using kiln::Slurp;

// Every entry under `dir`: a file's bytes, a link's target, or "<folder>".
std::map<std::string, std::string> Contents(const std::string& dir) {
  std::map<std::string, std::string> all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = it->path().string().substr(dir.size() + 1);
    const fs::file_status status = fs::symlink_status(it->path(), ec);
    if (fs::is_symlink(status)) {
      all[rel] = "<link to " + fs::read_symlink(it->path(), ec).string() + ">";
      it.disable_recursion_pending();
    } else if (fs::is_directory(status)) {
      all[rel] = "<folder>";
    } else {
      all[rel] = Slurp(it->path().string());
    }
  }
  return all;
}

const char kTiny[] = R"(name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 1 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
)";

const char kOther[] = R"(name: "other"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 5 } } }
layer { name: "fc_other" type: "InnerProduct" bottom: "data" top: "fc"
        inner_product_param { num_output: 2 } }
)";

const char kTrain[] = R"(name: "tiny_train"
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { scale: 0.00390625 } data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

std::string Solver(const std::string& prefix) {
  return "net: \"tiny_train.prototxt\"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: \"fixed\"\n"
         "max_iter: 4\nsnapshot: 0\ndisplay: 0\nrandom_seed: 1\nsnapshot_prefix: \"" +
         prefix + "\"\n";
}

class KilnAbuseTest : public ::testing::Test {
 protected:
  static std::string root_, template_;

  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp ? tmp : "/tmp") + "/kiln_abuse";
    fs::remove_all(root_);
    template_ = root_ + "/template";
    fs::create_directories(template_ + "/sub");
    const std::string& t = template_;
    Put(t + "/tiny.prototxt", kTiny);
    Put(t + "/other.prototxt", kOther);
    Put(t + "/tiny_train.prototxt", kTrain);
    Put(t + "/solver.prototxt", Solver("snap"));
    Put(t + "/solver_nofolder.prototxt", Solver("nofolder/snap"));
    Put(t + "/solver_file_prefix.prototxt", Solver("tiny.prototxt/snap"));
    Put(t + "/solver_proc.prototxt", Solver("/proc/kiln_snap"));  // unwritable, even for root
    Put(t + "/x.npy", Npy({2, 1, 4, 4}, 0.5f));
    Put(t + "/wrong.npy", Npy({3, 1, 4, 4}, 0.5f));
    Put(t + "/existing.npy", "keep me");
    Put(t + "/existing.svg", "keep me too");
    Put(t + "/sub/inner.txt", "inner");
    Put(t + "/empty.caffemodel", "");
    Put(t + "/empty.prototxt", "");
    Put(t + "/garbage.prototxt", "layer { this is not a net");
    Put(t + "/garbage.npy", "\x93NUMPY garbage");
    std::string pixels, labels;
    for (int i = 0; i < 8; ++i) {
      for (int p = 0; p < 16; ++p) pixels += static_cast<char>(((p < 8) == (i % 2)) ? 200 : 20);
      labels += static_cast<char>(i % 3);
    }
    Put(t + "/images.idx", Idx(3, {8, 4, 4}, pixels));
    Put(t + "/labels.idx", Idx(1, {8}, labels));
    Put(t + "/list.txt", "sub/inner.txt 0\n");
    for (const std::vector<std::string>& setup : std::vector<std::vector<std::string>>{
             {"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "db"},
             {"run", "--model", "tiny.prototxt", "--fill-seed", "1", "--input", "data=x.npy",
              "--save-weights", "tiny.caffemodel", "--device", "cpu"},
             {"run", "--model", "other.prototxt", "--fill-seed", "1", "--input", "data=other_x.npy",
              "--save-weights", "other.caffemodel", "--device", "cpu"},
             {"train", "--solver", "solver.prototxt", "--device", "cpu"}}) {
      if (setup[0] == "run" && setup[2] == "other.prototxt")
        Put(t + "/other_x.npy", Npy({1, 5}, 1));
      const KilnOutcome o = RunKiln(t, setup);
      ASSERT_EQ(o.status, 0) << setup[0] << ": " << o.output;
    }
    ASSERT_TRUE(fs::exists(t + "/snap_iter_4.caffemodel"));
    ASSERT_TRUE(fs::exists(t + "/snap_iter_4.solverstate"));
  }
};

std::string KilnAbuseTest::root_;
std::string KilnAbuseTest::template_;

struct Row {
  std::vector<std::string> args;  // "{dir}" stands for the row's folder (absolute)
  int status;                     // the expected exit status
  std::string message;            // a part of the output
  std::function<void(const std::string& dir)> setup = nullptr;
  std::vector<std::string> may_change = {};  // files the command is asked to replace
  bool needs_non_root = false;               // permissions do not stop root
};

void Link(const std::string& dir, const std::string& target, const std::string& name) {
  fs::create_symlink(target, dir + "/" + name);
}
void Hard(const std::string& dir, const std::string& target, const std::string& name) {
  fs::create_hard_link(dir + "/" + target, dir + "/" + name);
}

std::vector<Row> Rows() {
  const std::vector<std::string> run = {"run", "--model", "tiny.prototxt", "--device", "cpu"};
  const std::vector<std::string> with_w = {"--weights", "tiny.caffemodel"};
  auto R = [&](std::vector<std::string> head, std::vector<std::string> tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  auto Run = [&](std::vector<std::string> tail) { return R(R(run, with_w), tail); };
  auto Dump = [&](std::vector<std::string> tail) {
    return R({"dump", "--model", "tiny.prototxt", "--device", "cpu", "--fill-seed", "1"}, tail);
  };
  auto Train = [&](std::vector<std::string> tail) {
    return R({"train", "--solver", "solver.prototxt", "--device", "cpu"}, tail);
  };
  auto Time = [&](std::vector<std::string> tail) {
    return R({"time", "--model", "tiny_train.prototxt", "--device", "cpu", "--train",
              "--input-shape", "data=4,1,4,4", "--input-shape", "label=4", "--iterations", "1"},
             tail);
  };
  const std::string same_input = "an output never replaces an input";
  const std::string same_output = "name the same file";
  std::vector<Row> rows = {
      // --- run: an output that is an input, however spelled -------------------------------
      {Run({"--input", "data=x.npy", "--output", "prob=./x.npy"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob=x.npy"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob={dir}/x.npy"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob=sub/../x.npy"}), 1, same_input},
      {Run({"--input", "data=./sub/../x.npy", "--output", "prob={dir}/./x.npy"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob=link.npy"}), 1, same_input,
       [](const std::string& d) { Link(d, "x.npy", "link.npy"); }},
      {Run({"--input", "data=x.npy", "--output", "prob=link2.npy"}), 1, same_input,
       [](const std::string& d) {
         Link(d, "x.npy", "link.npy");
         Link(d, "link.npy", "link2.npy");
       }},
      {Run({"--input", "data=x.npy", "--output", "prob=hard.npy"}), 1, same_input,
       [](const std::string& d) { Hard(d, "x.npy", "hard.npy"); }},
      {Run({"--input", "data=link.npy", "--output", "prob=x.npy"}), 1, same_input,
       [](const std::string& d) { Link(d, "x.npy", "link.npy"); }},
      {Run({"--input", "data=x.npy", "--output", "prob=subl/../x.npy"}), 1, same_input,
       [](const std::string& d) { Link(d, "sub", "subl"); }},
      {Run({"--input", "data=x.npy", "--output", "prob=tiny.prototxt"}), 1, "--model"},
      {Run({"--input", "data=x.npy", "--output", "prob={dir}/tiny.prototxt"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob=./tiny.caffemodel"}), 1, "--weights"},
      {Run({"--input", "data=x.npy", "--save-weights", "{dir}/tiny.caffemodel"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--save-weights", "{dir}/tiny.prototxt"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--save-weights", "x.npy"}), 1, "--input data=x.npy"},
      {Run({"--input", "data=x.npy", "--save-weights", "w.caffemodel"}), 1, same_input,
       [](const std::string& d) { Hard(d, "tiny.caffemodel", "w.caffemodel"); }},
      // --- run: outputs that collide with each other -------------------------------------
      {Run({"--input", "data=x.npy", "--output", "prob=y.npy", "--output", "ip=./y.npy"}), 1,
       same_output},
      {Run({"--input", "data=x.npy", "--output", "prob=y.npy", "--save-weights", "{dir}/y.npy"}),
       1, same_output},
      {Run({"--input", "data=x.npy", "--output", "prob=y.npy", "--output", "ip=ly.npy"}), 1,
       same_output, [](const std::string& d) { Link(d, "y.npy", "ly.npy"); }},
      // --- run: existing outputs, folders, missing folders -----------------------------------
      {Run({"--input", "data=x.npy", "--output", "prob=existing.npy"}), 1, "pass --overwrite"},
      {Run({"--input", "data=x.npy", "--save-weights", "existing.npy"}), 1, "pass --overwrite"},
      {Run({"--input", "data=x.npy", "--output", "prob=le.npy"}), 1, "pass --overwrite",
       [](const std::string& d) { Link(d, "existing.npy", "le.npy"); }},
      {Run({"--input", "data=x.npy", "--output", "prob=existing.npy", "--overwrite"}), 0,
       "prob", nullptr, {"existing.npy"}},
      {Run({"--input", "data=x.npy", "--output", "prob=le.npy", "--overwrite"}), 0, "prob",
       [](const std::string& d) { Link(d, "existing.npy", "le.npy"); }, {"existing.npy"}},
      {Run({"--input", "data=x.npy", "--output", "prob=x.npy", "--overwrite"}), 1, same_input},
      {Run({"--input", "data=x.npy", "--output", "prob=sub"}), 1, "is a folder"},
      {Run({"--input", "data=x.npy", "--output", "prob=."}), 1, "is a folder"},
      {Run({"--input", "data=x.npy", "--output", "prob=nofolder/y.npy"}), 1, "does not exist"},
      {Run({"--input", "data=x.npy", "--output", "prob=existing.npy/y.npy"}), 1,
       "is not a folder"},
      {Run({"--input", "data=x.npy", "--output", "prob=dangling.npy"}), 1, "does not exist",
       [](const std::string& d) { Link(d, "nowhere/y.npy", "dangling.npy"); }},
      {Run({"--input", "data=x.npy", "--output", "prob=loop.npy"}), 1, "loop.npy",
       [](const std::string& d) {
         Link(d, "loop2.npy", "loop.npy");
         Link(d, "loop.npy", "loop2.npy");
       }},
      {Run({"--input", "data=x.npy", "--output", "prob=ro/y.npy"}), 1, "cannot write",
       [](const std::string& d) {
         fs::create_directory(d + "/ro");
         chmod((d + "/ro").c_str(), 0555);
       },
       {}, true},
      {Run({"--input", "data=x.npy", "--output", "prob=y.npy"}), 0, "prob"},
      {Run({"--input", "data=x.npy", "--output", "prob=/proc/kiln_y.npy"}), 1, "/proc/kiln_y.npy"},
      {Run({"--input", "data=x.npy", "--output", "prob=new/../y.npy"}), 1, "does not exist"},
      // --- run: bad outputs, inputs and numbers -----------------------------------------------
      {Run({"--input", "data=x.npy", "--output", "prob="}), 1, "expected NAME=VALUE"},
      {Run({"--input", "data=x.npy", "--output", "prob"}), 1, "expected NAME=VALUE"},
      {Run({"--input", "data=x.npy", "--output", "=y.npy"}), 1, "expected NAME=VALUE"},
      {Run({"--input", "data=x.npy", "--output", "nosuchblob=y.npy"}), 1, "no such blob"},
      {Run({"--input", "data=missing.npy"}), 1, "missing.npy"},
      {Run({"--input", "data=sub"}), 1, "not a regular file"},
      {Run({"--input", "data=tiny.prototxt"}), 1, "tiny.prototxt"},
      {Run({"--input", "data=garbage.npy"}), 1, "garbage.npy"},
      {Run({"--input", "data=empty.caffemodel"}), 1, "empty.caffemodel"},
      {Run({"--input", "nosuch=x.npy"}), 1, "no such input"},
      {Run({"--input", "data=wrong.npy"}), 1, "the array is"},
      {Run({}), 1, "needs --input data="},
      {Run({"--input", "data=x.npy", "--input", "data=wrong.npy"}), 1, "the array is"},
      {Run({"--input", "data=noread.npy"}), 1, "noread.npy",
       [](const std::string& d) {
         Put(d + "/noread.npy", Npy({2, 1, 4, 4}, 1));
         chmod((d + "/noread.npy").c_str(), 0);
       },
       {}, true},
      {R(run, {"--input", "data=x.npy"}), 1, "exactly one of --weights"},
      {R(run, {"--input", "data=x.npy", "--fill-seed", "1", "--weights", "tiny.caffemodel"}), 1,
       "exactly one of --weights"},
      {R(run, {"--input", "data=x.npy", "--fill-seed", "abc"}), 1, "--fill-seed abc"},
      {R(run, {"--input", "data=x.npy", "--fill-seed", "-1"}), 1, "--fill-seed -1"},
      {R(run, {"--input", "data=x.npy", "--fill-seed", "99999999999999999999999"}), 1,
       "--fill-seed"},
      {R(run, {"--input", "data=x.npy", "--weights", "empty.caffemodel"}), 1, "loads no blob"},
      {R(run, {"--input", "data=x.npy", "--weights", "other.caffemodel"}), 1,
       "none of its 1 layers with blobs"},
      {R(run, {"--input", "data=x.npy", "--weights", "empty.caffemodel",
               "--allow-missing-weights"}),
       0, "prob"},
      {R(run, {"--input", "data=x.npy", "--weights", "tiny.prototxt"}), 1, "tiny.prototxt"},
      {R(run, {"--input", "data=x.npy", "--weights", "missing.caffemodel"}), 1,
       "missing.caffemodel"},
      {R(run, {"--input", "data=x.npy", "--weights", "sub"}), 1, "sub"},
      {R(run, {"--input", "data=x.npy", "--weights", "x.npy"}), 1, "x.npy"},
      {{"run", "--model", "missing.prototxt", "--fill-seed", "1"}, 1, "missing.prototxt"},
      {{"run", "--model", "sub", "--fill-seed", "1"}, 1, "sub"},
      {{"run", "--model", "garbage.prototxt", "--fill-seed", "1"}, 1, "garbage.prototxt"},
      {{"run", "--model", "tiny.caffemodel", "--fill-seed", "1"}, 1, "needs --input data="},
      {{"run", "--model", "", "--fill-seed", "1"}, 1, ""},
      {Run({"--input", "data=x.npy", "--phase", "banana"}), 1, "--phase banana"},
      {Run({"--input", "data=x.npy", "--level", "x"}), 1, "--level x"},
      {Run({"--input", "data=x.npy", "--input-shape", "data=0,1"}), 1, "--input-shape"},
      {Run({"--input", "data=x.npy", "--input-shape", "data=-2,1,4,4"}), 1, "--input-shape"},
      {Run({"--input", "data=x.npy", "--input-shape", "data=a,b"}), 1, "--input-shape"},
      {Run({"--input", "data=x.npy", "--input-shape", "data"}), 1, "expected NAME=VALUE"},
      {Run({"--input", "data=x.npy", "--device", "gpu"}), 1, "--device gpu"},
      {Run({"--input", "data=x.npy", "--precision", "fp64"}), 1, "--precision"},
      {Run({"--input", "data=x.npy", "--layout", "chwn"}), 1, "--layout"},
      {Run({"--input", "data=x.npy", "--algo", "guess"}), 1, "--algo"},
      {Run({"--input", "data=x.npy", "--algo", "heuristic", "--tuning-file", "t.txt"}), 1,
       "--algo measure"},
      {Run({"--input", "data=x.npy", "--algo", "measure", "--tuning-file", "x.npy"}), 1,
       "--tuning-file x.npy"},
      {Run({"--input", "data=x.npy", "--algo", "measure", "--tuning-file", "./tiny.prototxt"}), 1,
       "--model"},
      {Run({"--input", "data=x.npy", "--algo", "measure", "--tuning-file", "y.npy", "--output",
            "prob=y.npy"}),
       1, "--output prob=y.npy"},
      {Run({"--input", "data=x.npy", "--workspace-limit", "-5"}), 1, "--workspace-limit"},
      {Run({"--input", "data=x.npy", "--workspace-limit", "12Q"}), 1, "--workspace-limit"},
      {Run({"--input", "data=x.npy", "--workspace-limit", "99999999999G"}), 1,
       "--workspace-limit"},
      {Run({"--input", "data=x.npy", "--workspace-budget", "0.5"}), 1, "--workspace-budget"},
      {Run({"--input", "data=x.npy", "--workspace-budget", "nan"}), 1, "--workspace-budget"},
      {Run({"--input", "data=x.npy", "--optimize", "maybe"}), 1, "--optimize maybe"},
      {Run({"--input", "data=x.npy", "--debug", "bogus"}), 1, "--debug bogus"},
      {Run({"--input", "data=x.npy", "--bogus"}), 1, "unknown flag --bogus"},
      {Run({"--input", "data=x.npy", "positional"}), 1, "unexpected argument 'positional'"},
      {Run({"--input", "data=x.npy", "--overwrite=yes"}), 1, "--overwrite takes no value"},
      {Run({"--input"}), 1, "--input needs a value"},
      // --- dump ---------------------------------------------------------------------------
      {Dump({"--svg", "tiny.prototxt"}), 1, same_input},
      {{"dump", "--svg", "m.prototxt", "--model", "m.prototxt"}, 1, same_input,
       [](const std::string& d) { fs::copy_file(d + "/tiny.prototxt", d + "/m.prototxt"); }},
      {Dump({"--dot", "{dir}/tiny.prototxt"}), 1, same_input},
      {Dump({"--memory", "lt.svg"}), 1, same_input,
       [](const std::string& d) { Link(d, "tiny.prototxt", "lt.svg"); }},
      {Dump({"--dot", "X", "--memory", "X"}), 1, same_output},
      {Dump({"--svg", "X", "--memory", "./X"}), 1, same_output},
      {Dump({"--dot", "X", "--svg", "sub/../X"}), 1, same_output},
      {Dump({"--memory", "existing.svg"}), 1, "pass --overwrite"},
      {Dump({"--memory", "existing.svg", "--overwrite"}), 0, "", nullptr, {"existing.svg"}},
      {Dump({"--dot", "g.dot", "--memory", "m.svg"}), 0, ""},
      {Dump({}), 1, "dump: give --svg FILE"},
      {Dump({"--dot", "nofolder/g.dot"}), 1, "does not exist"},
      {Dump({"--dot", "sub"}), 1, "is a folder"},
      {Dump({"--dot", "g.dot", "--batch", "0"}), 1, "--batch 0"},
      {Dump({"--dot", "g.dot", "--batch", "abc"}), 1, "--batch abc"},
      {Dump({"--dot", "g.dot", "--cuda-target", "sm_70"}), 1, "--cuda-target sm_70"},
      {{"dump", "--model", "tiny.prototxt", "--dot", "g.dot", "--cuda-target", "sm_90",
        "--device", "cpu"},
       1, "contradicts"},
      {{"dump", "--model", "tiny.prototxt", "--dot", "g.dot", "--weights", "empty.caffemodel"}, 1,
       "loads no blob"},
      {{"dump", "--model", "tiny.prototxt", "--dot", "g.dot", "--fill-seed", "0"}, 1,
       "--fill-seed"},
      {{"dump", "--model", "missing.prototxt", "--dot", "g.dot"}, 1, "missing.prototxt"},
      // --- compile and info -------------------------------------------------------------------
      {{"compile"}, 1, "--model is required"},
      {{"compile", "--model", "tiny.prototxt", "--batch", "-1"}, 1, "--batch -1"},
      {{"compile", "--model", "tiny.prototxt", "--weights", "other.caffemodel"}, 1,
       "loads no blob"},
      {{"compile", "--model", "tiny.prototxt", "--algo", "measure", "--tuning-file",
        "tiny.prototxt"},
       1, same_input},
      {{"compile", "--model", "tiny.prototxt", "--cuda-target", "sm_90", "--algo", "measure"}, 1,
       "cannot time"},
      {{"compile", "--model", "tiny.prototxt", "--disable-pass", "no_such_pass"}, 1, ""},
      {{"info", "--model", "missing.prototxt"}, 1, "missing.prototxt"},
      {{"info", "--model", "tiny.prototxt", "--weights", "empty.caffemodel"}, 1, "loads no blob"},
      {{"info", "--model", "tiny.prototxt", "--weights", "empty.caffemodel",
        "--allow-missing-weights"},
       0, "0 of 2 parameter blobs loaded"},
      {{"info", "--model", "tiny.prototxt", "--weights", "tiny.caffemodel"}, 0,
       "2 of 2 parameter blobs loaded"},
      {{"info", "--model", "tiny.prototxt", "--json=1"}, 1, "--json takes no value"},
      {{"info", "--model", "tiny.prototxt", "--level", "1.5"}, 1, "--level 1.5"},
      {{"info", "--model", "empty.prototxt"}, 0, ""},
      {{"info", "--model", "garbage.prototxt"}, 1, "garbage.prototxt"},
      // --- time -----------------------------------------------------------------------------
      {Time({"--profile", "--profile-steps", "tiny_train.prototxt"}), 1, same_input},
      {Time({"--profile", "--profile-steps", "existing.npy"}), 1, "pass --overwrite"},
      {Time({"--profile-steps", "p.tsv"}), 1, "--profile-steps goes with"},
      {Time({"--profile", "--profile-steps", "sub"}), 1, "is a folder"},
      {Time({"--profile", "--profile-steps", "p.tsv"}), 0, ""},
      {{"time", "--model", "tiny.prototxt", "--iterations", "0"}, 1, "--iterations 0"},
      {{"time", "--model", "tiny.prototxt", "--batch", "x"}, 1, "--batch x"},
      {{"time", "--model", "tiny.prototxt", "--solver", "solver.prototxt"}, 1, "--train"},
      {{"time", "--model", "tiny.prototxt", "--rank", "0"}, 1, "go with"},
      {{"time", "--model", "tiny_train.prototxt", "--train"}, 1, "--input-shape"},
      {{"time", "--model", "tiny.prototxt", "--weights", "empty.caffemodel"}, 1, "loads no blob"},
      // --- train: snapshots that are inputs, snapshot folders -------------------------------
      {Train({"--weights", "snap_iter_4.caffemodel"}), 2, "snapshots at iteration 4"},
      {Train({"--weights", "./snap_iter_4.caffemodel"}), 2, "snapshot_prefix 'snap'"},
      {Train({"--weights", "{dir}/snap_iter_4.caffemodel"}), 2, "snapshots at iteration 4"},
      {Train({"--weights", "w.caffemodel"}), 2, "snap_iter_4.caffemodel",
       [](const std::string& d) { Link(d, "snap_iter_4.caffemodel", "w.caffemodel"); }},
      {Train({"--weights", "w.caffemodel"}), 2, "snapshots at iteration 3",
       [](const std::string& d) {
         fs::copy_file(d + "/snap_iter_4.caffemodel", d + "/w.caffemodel");
         Hard(d, "w.caffemodel", "snap_iter_3.caffemodel");
       }},
      {Train({"--weights", "w.caffemodel", "--iterations", "2"}), 0, "",
       [](const std::string& d) {
         fs::copy_file(d + "/snap_iter_4.caffemodel", d + "/w.caffemodel");
         Hard(d, "w.caffemodel", "snap_iter_3.caffemodel");
       }},
      {Train({"--snapshot", "snap_iter_4.solverstate", "--iterations", "6"}), 0, ""},
      {Train({"--curve", "solver.prototxt"}), 2, same_input},
      {Train({"--curve", "tiny_train.prototxt"}), 2, same_input},
      {Train({"--curve", "sub"}), 2, "is a folder"},
      {Train({"--curve", "nofolder/c.svg"}), 1, "does not exist"},
      {Train({"--curve", "snap_iter_4.caffemodel", "--weights", "snap_iter_4.caffemodel",
              "--iterations", "2"}),
       2, same_input},
      {{"train", "--solver", "solver_nofolder.prototxt", "--device", "cpu"}, 1,
       "snapshot_prefix 'nofolder/snap'"},
      {{"train", "--solver", "solver_file_prefix.prototxt", "--device", "cpu"}, 1,
       "is not a folder"},
      {{"train", "--solver", "solver_proc.prototxt", "--device", "cpu"}, 1,
       "cannot write in the folder '/proc'"},
      {{"train", "--solver", "solver_proc.prototxt", "--device", "cpu", "--iterations", "1"}, 1,
       "snapshot_prefix '/proc/kiln_snap'"},
      {{"train", "--solver", "ro/solver.prototxt", "--device", "cpu"}, 1, "cannot write",
       [](const std::string& d) {
         fs::create_directory(d + "/ro");
         Put(d + "/ro/solver.prototxt",
             "net: \"../tiny_train.prototxt\"\nbase_lr: 0.1\nmax_iter: 2\nlr_policy: \"fixed\"\n");
         chmod((d + "/ro").c_str(), 0555);
       },
       {}, true},
      // --- train: weights, flags, numbers ---------------------------------------------------
      {Train({"--weights", "empty.caffemodel"}), 2, "loads no blob"},
      {Train({"--weights", "other.caffemodel"}), 2, "loads no blob"},
      {Train({"--weights", "empty.caffemodel", "--allow-missing-weights", "--iterations", "1"}), 0,
       ""},
      {Train({"--weights", "tiny.caffemodel", "--snapshot", "snap_iter_4.solverstate"}), 2,
       "not both"},
      {{"train", "--device", "cpu"}, 2, "--solver is required"},
      {{"train", "--solver", "missing.prototxt"}, 1, "missing.prototxt"},
      {{"train", "--solver", "tiny.prototxt"}, 2, "tiny.prototxt"},
      {{"train", "--solver", "sub"}, 2, "sub"},
      {Train({"--iterations", "0"}), 2, "--iterations"},
      {Train({"--iterations", "-3"}), 2, "--iterations"},
      {Train({"--iterations", "3000000000"}), 2, "--iterations"},
      {Train({"--iterations", "abc"}), 2, "--iterations"},
      {Train({"--data-seed", "x"}), 2, "--data-seed"},
      {Train({"--loss-scale", "0"}), 2, "--loss-scale 0"},
      {Train({"--loss-scale", "nan"}), 2, "--loss-scale nan"},
      {Train({"--snapshot", "missing.solverstate"}), 1, "missing.solverstate"},
      {Train({"--snapshot", "tiny.caffemodel"}), 2, "tiny.caffemodel"},
      {Train({"--snapshot", "empty.caffemodel"}), 2, "empty.caffemodel"},
      {Train({"--bogus"}), 2, "unknown flag --bogus"},
      {Train({"--rank", "0"}), 2, ""},
      {Train({"--rank", "0", "--world-size", "2", "--rendezvous", "file:solver.prototxt"}), 2,
       "is not a rendezvous file"},
      {Train({"--rank", "1", "--world-size", "2", "--rendezvous", "file:{dir}/x.npy"}), 2,
       "is not a rendezvous file"},
      {Train({"--rank", "0", "--world-size", "2", "--rendezvous", "file:sub"}), 2, "is a folder"},
      {Time({"--rank", "0", "--world-size", "2", "--rendezvous", "file:tiny.prototxt"}), 1,
       "is not a rendezvous file"},
      // --- test -----------------------------------------------------------------------------
      {{"test", "--model", "tiny_train.prototxt", "--weights", "empty.caffemodel"}, 2,
       "loads no blob"},
      {{"test", "--model", "tiny_train.prototxt", "--weights", "other.caffemodel"}, 2,
       "loads no blob"},
      {{"test", "--model", "missing.prototxt", "--weights", "tiny.caffemodel"}, 1,
       "missing.prototxt"},
      {{"test", "--model", "tiny_train.prototxt", "--weights", "tiny.caffemodel", "--iterations",
        "0"},
       2, "--iterations"},
      {{"test", "--model", "tiny_train.prototxt"}, 2, "--weights are required"},
      {{"test", "--model", "tiny_train.prototxt", "--weights", "snap_iter_4.caffemodel",
        "--device", "cpu", "--iterations", "1"},
       0, "loss"},
      // --- convert --------------------------------------------------------------------------
      {{"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "images.idx"}, 1,
       same_input},
      {{"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", ".",
        "--overwrite"},
       1, same_input},
      {{"convert", "--images", "db/images.idx", "--labels", "labels.idx", "--out", "db",
        "--overwrite"},
       1, "--images db/images.idx is or lies inside --out db",
       [](const std::string& d) { fs::copy_file(d + "/images.idx", d + "/db/images.idx"); }},
      {{"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "db"}, 1,
       "already exists"},
      {{"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "sub",
        "--overwrite"},
       1, "not a lmdb database"},
      {{"convert", "--images", "missing.idx", "--labels", "labels.idx", "--out", "db2"}, 1,
       "missing.idx"},
      {{"convert", "--images", "labels.idx", "--labels", "labels.idx", "--out", "db2"}, 1,
       "dimensions"},
      {{"convert", "--images", "images.idx", "--labels", "images.idx", "--out", "db2"}, 1,
       "dimensions"},
      {{"convert", "--images", "tiny.prototxt", "--labels", "labels.idx", "--out", "db2"}, 1,
       "tiny.prototxt"},
      {{"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "db2",
        "--backend", "sqlite"},
       1, "sqlite"},
      {{"convert", "--images", "images.idx", "--labels", "labels.idx"}, 1, "convert needs"},
      {{"convert", "--list", "list.txt", "--out", "list.txt"}, 1, same_input},
      {{"convert", "--list", "list.txt", "--root_folder", ".", "--out", ".", "--overwrite"}, 1,
       same_input},
      {{"convert", "--list", "missing.txt", "--out", "db2"}, 1, "missing.txt"},
      {{"convert", "--list", "list.txt", "--out", "db2", "--resize_height", "x"}, 1,
       "--resize_height 'x'"},
      {{"convert", "--list", "list.txt", "--out", "db2", "--seed", "-1"}, 1, "--seed"},
      // --- diff-weights and the command itself ----------------------------------------------
      {{"diff-weights", "--weights", "missing.caffemodel", "--against", "tiny.caffemodel"}, 1,
       "missing.caffemodel"},
      {{"diff-weights", "--weights", "tiny.caffemodel"}, 2, "--against"},
      {{"diff-weights", "--weights", "tiny.caffemodel", "--against", "tiny.caffemodel",
        "--tolerance", "-1"},
       2, "--tolerance -1"},
      {{}, 2, "usage: kiln <command>"},
      {{"bogus"}, 2, "usage: kiln <command>"},
      {{"version", "extra"}, 2, "usage: kiln <command>"},
  };
  return rows;
}

TEST_F(KilnAbuseTest, EveryBadInvocationFailsCleanlyAndChangesNoFile) {
  const std::vector<Row> rows = Rows();
  EXPECT_GE(rows.size(), 100u);
  const bool root = geteuid() == 0;
  // Each row in its own copy of the template, run a few at a time.
  std::vector<std::map<std::string, std::string>> before(rows.size());
  std::vector<KilnJob> jobs;
  std::vector<size_t> job_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].needs_non_root && root) continue;
    const std::string dir = root_ + "/row" + std::to_string(i + 1);
    fs::copy(template_, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    if (rows[i].setup) rows[i].setup(dir);
    before[i] = Contents(dir);
    std::vector<std::string> args = rows[i].args;
    for (std::string& a : args) {
      for (size_t at; (at = a.find("{dir}")) != std::string::npos;) a.replace(at, 5, dir);
    }
    jobs.push_back({dir, args, root_ + "/row" + std::to_string(i + 1) + ".log", {}});
    job_rows.push_back(i);
  }
  const std::vector<KilnOutcome> outcomes = kiln::RunKilnJobs(jobs, 4);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Row& row = rows[job_rows[j]];
    const KilnOutcome& o = outcomes[j];
    const std::string& dir = jobs[j].dir;
    std::string shown;
    for (const std::string& a : row.args) shown += " " + a;
    SCOPED_TRACE("row " + std::to_string(job_rows[j] + 1) + ": kiln" + shown);
    const bool failed_before = HasFailure();
    EXPECT_EQ(o.status, row.status) << o.output;
    EXPECT_NE(o.output.find(row.message), std::string::npos)
        << "expected '" << row.message << "' in: " << o.output;
    if (row.status != 0) {
      EXPECT_NE(o.output.find("kiln"), std::string::npos) << o.output;
    }
    for (const char* locked : {"/ro", "/noread.npy"}) {
      if (fs::exists(dir + locked)) chmod((dir + locked).c_str(), 0755);
    }
    const std::map<std::string, std::string> after = Contents(dir);
    for (const auto& [path, bytes] : before[job_rows[j]]) {
      bool allowed = false;
      for (const std::string& m : row.may_change) allowed = allowed || m == path;
      if (allowed) continue;
      auto it = after.find(path);
      if (it == after.end()) {
        ADD_FAILURE() << path << " is gone";
      } else if (it->second != bytes) {
        ADD_FAILURE() << path << " changed";
      }
    }
    for (const auto& [path, bytes] : after) {
      EXPECT_EQ(path.find(".kiln-partial"), std::string::npos) << path << " left behind";
      EXPECT_EQ(path.find(".kiln-write-probe"), std::string::npos) << path << " left behind";
    }
    if (!failed_before && !HasFailure()) fs::remove_all(dir);
  }
  std::printf("%zu rows, %zu run (%s)\n", rows.size(), jobs.size(),
              root ? "as root: the permission rows skipped" : "all");
}

}  // namespace
