// `kiln run` and `kiln info` end to end, and the .npy reader/writer they use.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "gtest/gtest.h"
#include "tests/util/caffe_files.h"
#include "tools/caffe_commands.h"
#include "tools/npy.h"

namespace kiln {
namespace {

int Call(std::vector<std::string> args) {
  args.insert(args.begin(), "kiln");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  const std::string command = args[1];
  return command == "run" ? RunCommand(static_cast<int>(argv.size()), argv.data())
                          : InfoCommand(static_cast<int>(argv.size()), argv.data());
}

TEST(NpyTest, RoundTripsF32AndF16AndRejectsOtherDtypes) {
  HostTensor t(*TensorType::Create(DataType::kF32, {2, 3}));
  for (int i = 0; i < 6; ++i) t.SetFloat(i, 0.5f * i - 1);
  auto bytes = SerializeNpy(t);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size() % 64, 24u);  // 64-byte aligned header, then 6 floats
  auto back = ParseNpy(*bytes, "t.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type().dims(), t.type().dims());
  EXPECT_EQ(back->ToF32Vector(), t.ToF32Vector());
  HostTensor h(*TensorType::Create(DataType::kF16, {4}));
  for (int i = 0; i < 4; ++i) h.SetFloat(i, 0.25f * i);
  auto hb = ParseNpy(*SerializeNpy(h), "h.npy");
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->type().dtype(), DataType::kF16);
  EXPECT_EQ(hb->ToF32Vector(), h.ToF32Vector());
  std::string f8 = *bytes;
  f8.replace(f8.find("<f4"), 3, "<f8");
  EXPECT_NE(ParseNpy(f8, "d.npy").status().message().find("'<f8'"), std::string::npos);
  std::string fortran = *bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(ParseNpy(fortran, "f.npy").status().message().find("Fortran"), std::string::npos);
  EXPECT_FALSE(ParseNpy(bytes->substr(0, bytes->size() - 1), "short.npy").ok());
  EXPECT_FALSE(ParseNpy("not numpy", "x.npy").ok());
}

TEST(KilnRunTest, LenetWithTrainedWeightsOnTheReferenceBackend) {
  HostTensor image(*TensorType::Create(DataType::kF32, {64, 1, 28, 28}));
  for (int n = 0; n < 64; ++n) {
    for (int y = 6; y < 22; ++y) image.SetFloat((n * 28 + y) * 28 + 14, 1.0f);
  }
  const std::string input = ScratchFile("digits.npy");
  ASSERT_TRUE(WriteFileBytes(input, *SerializeNpy(image)).ok());
  const std::string out1 = ScratchFile("prob1.npy"), out2 = ScratchFile("prob2.npy");
  const std::string saved = ScratchFile("saved.caffemodel");
  for (const std::string& out : {out1, out2}) {
    ASSERT_EQ(
        0, Call({"run", "--model", CaffeFile("lenet.prototxt"), "--weights",
                 CaffeFile("lenet_iter_10000.caffemodel"), "--device", "reference", "--input",
                 "data=" + input, "--output", "prob=" + out, "--output", "ip1=" + out + ".ip1.npy",
                 "--save-weights", saved, "--overwrite"}));  // the second run replaces saved
  }
  auto a = ParseNpy(*ReadFileBytes(out1), out1);
  auto b = ParseNpy(*ReadFileBytes(out2), out2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->type().dims(), (std::vector<int64_t>{64, 10}));
  EXPECT_EQ(a->ToF32Vector(), b->ToF32Vector());  // deterministic
  for (int n = 0; n < 64; ++n) {
    double sum = 0;
    for (int c = 0; c < 10; ++c) sum += a->GetFloat(n * 10 + c);
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  auto ip1 = ParseNpy(*ReadFileBytes(out1 + ".ip1.npy"), "ip1");
  ASSERT_TRUE(ip1.ok());
  EXPECT_EQ(ip1->type().dims(), (std::vector<int64_t>{64, 500}));  // after the in-place ReLU
  for (int64_t i = 0; i < ip1->type().num_elements(); ++i) ASSERT_GE(ip1->GetFloat(i), 0.0f);
  // The saved weights are the loaded ones: running from them gives the same probabilities.
  const std::string out3 = ScratchFile("prob3.npy");
  ASSERT_EQ(0, Call({"run", "--model", CaffeFile("lenet.prototxt"), "--weights", saved, "--device",
                     "reference", "--input", "data=" + input, "--output", "prob=" + out3}));
  EXPECT_EQ(ParseNpy(*ReadFileBytes(out3), out3)->ToF32Vector(), a->ToF32Vector());
}

TEST(KilnRunTest, FillSeedIsReproducibleAndSaved) {
  HostTensor image(*TensorType::Create(DataType::kF32, {1, 3, 32, 32}));
  for (int i = 0; i < 3072; ++i) image.SetFloat(i, static_cast<float>(i % 17) / 17);
  const std::string input = ScratchFile("cifar.npy");
  ASSERT_TRUE(WriteFileBytes(input, *SerializeNpy(image)).ok());
  const std::string w1 = ScratchFile("fill1.caffemodel"), w2 = ScratchFile("fill2.caffemodel");
  for (const std::string& w : {w1, w2}) {
    ASSERT_EQ(0, Call({"run", "--model", CaffeFile("cifar10_quick.prototxt"), "--fill-seed", "5",
                       "--input", "data=" + input, "--save-weights", w}));
  }
  EXPECT_EQ(*ReadFileBytes(w1), *ReadFileBytes(w2));
}

// --debug: the switches change no output; check-finite stops at the first step writing a NaN
// (here conv1, from a NaN in the image); an unknown switch is an error.
TEST(KilnRunTest, DebugSwitchesKeepTheOutputAndCheckFiniteStopsAtNaN) {
  HostTensor image(*TensorType::Create(DataType::kF32, {64, 1, 28, 28}));
  for (int64_t i = 0; i < image.type().num_elements(); ++i) image.SetFloat(i, (i % 13) / 13.0f);
  const std::string input = ScratchFile("debug_digits.npy");
  ASSERT_TRUE(WriteFileBytes(input, *SerializeNpy(image)).ok());
  const std::string model = CaffeFile("lenet.prototxt");
  const std::string weights = CaffeFile("lenet_iter_10000.caffemodel");
  const std::string plain = ScratchFile("plain.npy"), debug = ScratchFile("debug.npy");
  ASSERT_EQ(0, Call({"run", "--model", model, "--weights", weights, "--device", "cpu", "--input",
                     "data=" + input, "--output", "prob=" + plain}));
  ASSERT_EQ(0, Call({"run", "--model", model, "--weights", weights, "--device", "cpu", "--input",
                     "data=" + input, "--output", "prob=" + debug, "--debug",
                     "no-reuse,no-in-place,poison,check-finite"}));
  EXPECT_EQ(ParseNpy(*ReadFileBytes(debug), debug)->ToF32Vector(),
            ParseNpy(*ReadFileBytes(plain), plain)->ToF32Vector());
  image.SetFloat(1000, std::nanf(""));
  const std::string bad = ScratchFile("nan_digits.npy");
  ASSERT_TRUE(WriteFileBytes(bad, *SerializeNpy(image)).ok());
  const std::string nan_out = ScratchFile("nan_prob.npy");
  EXPECT_EQ(0, Call({"run", "--model", model, "--weights", weights, "--device", "cpu", "--input",
                     "data=" + bad, "--output", "prob=" + nan_out}));  // NaN goes through
  EXPECT_EQ(1, Call({"run", "--model", model, "--weights", weights, "--device", "cpu", "--input",
                     "data=" + bad, "--output", "prob=" + ScratchFile("x.npy"), "--debug",
                     "check-finite"}));
  EXPECT_EQ(1, Call({"run", "--model", model, "--weights", weights, "--input", "data=" + input,
                     "--debug", "no-reuse,bogus"}));
}

TEST(KilnRunTest, BadUsageIsAnErrorNotACrash) {
  const std::string input = ScratchFile("wrong.npy");
  HostTensor wrong(*TensorType::Create(DataType::kF32, {1, 1, 28, 28}));
  ASSERT_TRUE(WriteFileBytes(input, *SerializeNpy(wrong)).ok());
  const std::string model = CaffeFile("lenet.prototxt");
  const std::string weights = CaffeFile("lenet_iter_10000.caffemodel");
  EXPECT_EQ(1, Call({"run", "--model", model, "--weights", weights, "--input",
                     "data=" + input}));  // lenet takes 64 images
  EXPECT_EQ(1, Call({"run", "--model", model, "--input", "data=" + input}));  // no weights
  EXPECT_EQ(1, Call({"run", "--model", model, "--weights", weights, "--fill-seed", "1", "--input",
                     "data=" + input}));
  EXPECT_EQ(1, Call({"run", "--model", model, "--weights", weights, "--input", "data=" + input,
                     "--output", "prob=" + weights}));  // would overwrite
  EXPECT_EQ(1, Call({"info", "--model", ScratchFile("missing.prototxt")}));
  EXPECT_EQ(1, Call({"info", "--model", model, "--bogus"}));
  EXPECT_EQ(0, Call({"info", "--model", model, "--json"}));
}

}  // namespace
}  // namespace kiln
