// .solverstate reading and writing (proto/solver_state.h): the exact bytes Caffe writes for a
// small state, round trips, the real Caffe LeNet snapshot (legacy 4-d history blobs) read,
// checked against LeNet's parameters, written back and read again, and the refusals, each
// naming the file and what is wrong.
#include "frontends/caffe/solver_state.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "gtest/gtest.h"
#include "tests/util/caffe_files.h"

namespace kiln {
namespace {

using Shape = std::vector<int64_t>;

void ExpectSame(const SolverStateData& a, const SolverStateData& b) {
  EXPECT_EQ(a.iter, b.iter);
  EXPECT_EQ(a.learned_net, b.learned_net);
  EXPECT_EQ(a.current_step, b.current_step);
  EXPECT_EQ(a.history_shapes, b.history_shapes);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) {
    // Bit for bit: == on the vectors would also be false for NaNs.
    ASSERT_EQ(a.history[i].size(), b.history[i].size()) << i;
    if (a.history[i].empty()) continue;
    EXPECT_EQ(0, std::memcmp(a.history[i].data(), b.history[i].data(),
                             sizeof(float) * a.history[i].size()))
        << "history blob " << i;
  }
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(SolverStateTest, WritesCaffesBytes) {
  SolverStateData state;
  state.iter = 5;
  state.learned_net = "a";
  state.current_step = 2;
  state.history = {{1.0f, -2.0f}};
  state.history_shapes = {{2}};
  auto bytes = SerializeSolverState(state);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // iter (1, varint) 5; learned_net (2) "a"; history (3) of 15 bytes: data (5, packed) 1.0f
  // -2.0f, shape (7) { dim (1, packed) 2 }; current_step (4) 2.
  const std::string want(
      "\x08\x05"
      "\x12\x01"
      "a"
      "\x1a\x0f"
      "\x2a\x08\x00\x00\x80\x3f\x00\x00\x00\xc0"
      "\x3a\x03\x0a\x01\x02"
      "\x20\x02",
      24);
  EXPECT_EQ(*bytes, want);
  // Defaults are written too, as Caffe's snapshot sets every field.
  auto empty = SerializeSolverState(SolverStateData());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::string("\x08\x00\x12\x00\x20\x00", 6));
}

TEST(SolverStateTest, RoundTrip) {
  SolverStateData state;
  state.iter = 123456;
  state.learned_net = "snapshots/net_iter_123456.caffemodel";
  state.current_step = 3;
  // A conv weight, a bias, a scalar (no dims), an empty blob, and an Adam-style second half.
  state.history = {{0.5f, -0.25f, 1e-30f, -0.0f, 3.0e38f, 7.0f}, {1, 2, 3}, {42}, {}, {9, 8, 7}};
  state.history_shapes = {{2, 1, 1, 3}, {3}, {}, {0, 5}, {3}};
  const std::string path = ScratchFile("round_trip.solverstate");
  ASSERT_TRUE(WriteSolverState(path, state).ok());
  EXPECT_FALSE(FileExists(path + ".kiln-partial"));
  auto read = ReadSolverStateData(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, state);
  // Write -> read -> write is byte-identical.
  auto first = SerializeSolverState(state);
  auto second = SerializeSolverState(*read);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(SolverStateTest, HistoryOrderAndShapes) {
  // Four parameters, Adam: m of every parameter, then v of every parameter.
  EXPECT_EQ(HistoryIndex(0, 2, 4), 2u);
  EXPECT_EQ(HistoryIndex(1, 0, 4), 4u);
  EXPECT_EQ(HistoryIndex(1, 3, 4), 7u);
  EXPECT_TRUE(HistoryShapeMatches({20, 1, 5, 5}, {20, 1, 5, 5}));
  EXPECT_TRUE(HistoryShapeMatches({1, 1, 1, 20}, {20}));
  EXPECT_TRUE(HistoryShapeMatches({1, 1, 500, 800}, {500, 800}));
  EXPECT_FALSE(HistoryShapeMatches({1, 1, 1, 20}, {21}));
  EXPECT_FALSE(HistoryShapeMatches({20}, {1, 1, 1, 20}));
  EXPECT_FALSE(HistoryShapeMatches({500, 800}, {800, 500}));
  EXPECT_FALSE(HistoryShapeMatches({1, 1, 1, 1, 20}, {20}));
}

// LeNet's learnable parameters in net order: conv1, conv2, ip1, ip2 (weights, then bias).
const std::vector<Shape>& LeNetParamShapes() {
  static const auto* shapes = new std::vector<Shape>{{20, 1, 5, 5}, {20},  {50, 20, 5, 5}, {50},
                                                     {500, 800},    {500}, {10, 500},      {10}};
  return *shapes;
}

TEST(SolverStateTest, ReadsCaffesLeNetSnapshot) {
  const std::string path = CaffeFile("v1_lenet_iter_10000.solverstate");
  auto state = ReadSolverStateData(path);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->iter, 10000);
  EXPECT_EQ(state->learned_net, "examples/mnist/lenet_iter_10000.caffemodel");
  EXPECT_EQ(state->current_step, 0);
  // An SGD snapshot: one history per learnable parameter (4 layers x weights and bias), stored
  // in the legacy 4-d form of the Caffe that wrote it.
  ASSERT_EQ(state->history.size(), LeNetParamShapes().size());
  const std::vector<Shape> legacy = {{20, 1, 5, 5},   {1, 1, 1, 20},    {50, 20, 5, 5},
                                     {1, 1, 1, 50},   {1, 1, 500, 800}, {1, 1, 1, 500},
                                     {1, 1, 10, 500}, {1, 1, 1, 10}};
  EXPECT_EQ(state->history_shapes, legacy);
  int64_t values = 0;
  for (size_t i = 0; i < state->history.size(); ++i) {
    EXPECT_TRUE(HistoryShapeMatches(state->history_shapes[i], LeNetParamShapes()[i])) << i;
    values += static_cast<int64_t>(state->history[i].size());
  }
  EXPECT_EQ(values, 431080);
  // The values are the file's floats, bit for bit (compared with the raw message).
  auto raw = ReadSolverState(path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  for (int i = 0; i < raw->history_size(); ++i) {
    ASSERT_EQ(raw->history(i).data_size(), static_cast<int>(state->history[i].size()));
    EXPECT_EQ(0, std::memcmp(raw->history(i).data().data(), state->history[i].data(),
                             sizeof(float) * state->history[i].size()));
  }
}

TEST(SolverStateTest, WritesCaffesLeNetSnapshotBack) {
  auto state = ReadSolverStateData(CaffeFile("v1_lenet_iter_10000.solverstate"));
  ASSERT_TRUE(state.ok()) << state.status();
  const std::string path = ScratchFile("lenet_rewritten.solverstate");
  ASSERT_TRUE(WriteSolverState(path, *state).ok());
  auto again = ReadSolverStateData(path);
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectSame(*again, *state);
  // The rewritten file is in the current format: BlobShape dims and packed data, which is what
  // Caffe writes today and reads back (Blob::FromProto takes either form).
  auto raw = ReadSolverState(path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  for (const caffe::BlobProto& blob : raw->history()) {
    EXPECT_TRUE(blob.has_shape());
    EXPECT_FALSE(blob.has_num() || blob.has_channels() || blob.has_height() || blob.has_width());
  }
  EXPECT_TRUE(raw->has_current_step());
}

TEST(SolverStateTest, DoubleDataIsRead) {
  caffe::SolverState proto;
  proto.set_iter(7);
  caffe::BlobProto* blob = proto.add_history();
  blob->mutable_shape()->add_dim(2);
  blob->add_double_data(0.5);
  blob->add_double_data(-1.5);
  auto state = SolverStateFromProto(proto, "doubles");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->history[0], (std::vector<float>{0.5f, -1.5f}));
}

void ExpectReadError(const std::string& name, const std::string& bytes,
                     const std::vector<std::string>& fragments) {
  const std::string path = ScratchFile(name);
  WriteRaw(path, bytes);
  auto state = ReadSolverStateData(path);
  ASSERT_FALSE(state.ok()) << name;
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument) << state.status();
  EXPECT_NE(state.status().message().find(path), std::string::npos) << state.status();
  for (const std::string& f : fragments) {
    EXPECT_NE(state.status().message().find(f), std::string::npos) << state.status();
  }
}

TEST(SolverStateTest, ReadErrorsNameTheFileAndTheProblem) {
  auto missing = ReadSolverStateData(ScratchFile("no_such.solverstate"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such.solverstate"), std::string::npos);

  ExpectReadError("empty.solverstate", "", {"empty"});
  // The real snapshot cut short in the middle of its first blob.
  auto whole = ReadFileBytes(CaffeFile("v1_lenet_iter_10000.solverstate"));
  ASSERT_TRUE(whole.ok());
  ExpectReadError("truncated.solverstate", whole->substr(0, 1000), {"SolverState"});

  caffe::SolverState proto;
  proto.set_iter(1);
  caffe::BlobProto* blob = proto.add_history();
  blob->mutable_shape()->add_dim(50);
  for (int i = 0; i < 49; ++i) blob->add_data(1);
  ExpectReadError("short_blob.solverstate", proto.SerializeAsString(),
                  {"history blob 0", "[50]", "50 values", "49"});
  blob->mutable_shape()->set_dim(0, -3);
  ExpectReadError("negative_dim.solverstate", proto.SerializeAsString(),
                  {"history blob 0", "[-3]", "invalid"});

  // A .caffemodel is not a solver state.
  auto model = ReadFileBytes(CaffeFile("lenet_iter_10000.caffemodel"));
  ASSERT_TRUE(model.ok());
  ExpectReadError("model.solverstate", *model, {"not a SolverState"});
}

TEST(SolverStateTest, WriteErrorsLeaveNoFileBehind) {
  const std::string path = ScratchFile("bad.solverstate");
  SolverStateData state;
  state.history = {{1, 2, 3}};
  state.history_shapes = {{2, 2}};
  absl::Status status = WriteSolverState(path, state);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_NE(status.message().find("history blob 0"), std::string::npos) << status;
  EXPECT_FALSE(FileExists(path));
  EXPECT_FALSE(FileExists(path + ".kiln-partial"));

  state.history_shapes = {};
  status = WriteSolverState(path, state);
  EXPECT_NE(status.message().find("0 history shapes for 1 history blobs"), std::string::npos)
      << status;

  state.history_shapes = {{3}};
  state.iter = int64_t{1} << 31;
  status = WriteSolverState(path, state);
  EXPECT_NE(status.message().find("int32"), std::string::npos) << status;

  // A failed write keeps the previous snapshot intact.
  state.iter = 1;
  ASSERT_TRUE(WriteSolverState(path, state).ok());
  SolverStateData broken = state;
  broken.current_step = -1;
  EXPECT_FALSE(WriteSolverState(path, broken).ok());
  auto kept = ReadSolverStateData(path);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ExpectSame(*kept, state);

  // A folder that does not exist.
  const std::string nowhere = ScratchFile("no_such_folder/x.solverstate");
  status = WriteSolverState(nowhere, state);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(nowhere), std::string::npos) << status;
}

}  // namespace
}  // namespace kiln
