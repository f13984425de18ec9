// Files compared by identity (device+inode, links followed), the checks on a command's outputs,
// and WriteFileBytes' atomic replacement.
#include "base/file_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/file_io.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class FileIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/file_identity_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/sub");
    ASSERT_TRUE(WriteFileBytes(dir_ + "/x", "x").ok());
  }
  std::string P(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(FileIdentityTest, SpellingsLinksAndHardLinksAreOneFile) {
  fs::create_symlink("x", P("link"));
  fs::create_hard_link(P("x"), P("hard"));
  const FileIdentity x = *IdentifyFile(P("x"));
  EXPECT_TRUE(x.exists);
  for (const std::string& same : {P("./x"), P("sub/../x"), P("link"), P("hard"), dir_ + "//x"}) {
    EXPECT_EQ(*IdentifyFile(same), x) << same;
  }
  EXPECT_NE(*IdentifyFile(P("sub")), x);
  // Files that do not exist yet: the parent folder and the name.
  const FileIdentity y = *IdentifyFile(P("y"));
  EXPECT_FALSE(y.exists);
  EXPECT_EQ(*IdentifyFile(P("sub/../y")), y);
  EXPECT_NE(*IdentifyFile(P("sub/y")), y);
  fs::create_symlink("y", P("to_y"));  // dangling: its target's identity
  EXPECT_EQ(*IdentifyFile(P("to_y")), y);
  EXPECT_FALSE(IdentifyFile(P("nofolder/y")).ok());
  EXPECT_FALSE(IdentifyFile(P("x/y")).ok());
  EXPECT_FALSE(IdentifyFile("").ok());
}

TEST_F(FileIdentityTest, OutputsMeetNoInputNoOtherOutputAndNoExistingFileUnlessAsked) {
  const std::vector<FlagPath> inputs = {{"--input data=", P("x")}};
  absl::Status s =
      CheckOutputFiles(inputs, {{"--output prob=", P("sub/../x")}}, ExistingOutput::kReplace);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--output prob=" + P("sub/../x")), std::string::npos) << s;
  EXPECT_NE(s.message().find("--input data=" + P("x")), std::string::npos) << s;
  s = CheckOutputFiles({}, {{"--dot", P("g")}, {"--svg", P("./g")}}, ExistingOutput::kRefuse);
  EXPECT_NE(s.message().find("name the same file"), std::string::npos) << s;
  EXPECT_EQ(CheckOutputFiles({}, {{"--svg", P("x")}}, ExistingOutput::kRefuse).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(CheckOutputFiles({}, {{"--svg", P("x")}}, ExistingOutput::kReplace).ok());
  EXPECT_TRUE(
      CheckOutputFiles({}, {{"--tuning-file", P("x"), true}}, ExistingOutput::kRefuse).ok());
  EXPECT_FALSE(CheckOutputFiles({}, {{"--svg", P("sub")}}, ExistingOutput::kReplace).ok());
  EXPECT_FALSE(CheckOutputFiles({}, {{"--svg", P("none/g")}}, ExistingOutput::kReplace).ok());
  EXPECT_TRUE(CheckOutputFiles(inputs, {{"--svg", P("g")}}, ExistingOutput::kRefuse).ok());
}

TEST_F(FileIdentityTest, InsideAndProbe) {
  EXPECT_FALSE(CheckNotInside({"--images", P("x")}, {"--out", dir_}).ok());
  EXPECT_FALSE(CheckNotInside({"--images", P("x")}, {"--out", P("x")}).ok());
  EXPECT_TRUE(CheckNotInside({"--images", P("x")}, {"--out", P("sub")}).ok());
  EXPECT_TRUE(CheckNotInside({"--images", P("x")}, {"--out", P("new")}).ok());
  EXPECT_TRUE(ProbeWritableFolder(dir_, "test").ok());
  EXPECT_EQ(ProbeWritableFolder(P("none"), "test").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ProbeWritableFolder(P("x"), "test").ok());
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.path().filename() != "";
  EXPECT_EQ(entries, 2u);  // x and sub: the probe is gone
}

TEST_F(FileIdentityTest, WritesReplaceAtomicallyThroughLinksKeepingTheMode) {
  chmod(P("x").c_str(), 0640);
  fs::create_symlink("x", P("link"));
  ASSERT_TRUE(WriteFileBytes(P("link"), "new").ok());
  EXPECT_TRUE(fs::is_symlink(P("link")));  // the link stays; its target is replaced
  EXPECT_EQ(*ReadFileBytes(P("x")), "new");
  struct stat info;
  ASSERT_EQ(stat(P("x").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
  EXPECT_FALSE(WriteFileBytes(P("none/y"), "y").ok());
  EXPECT_FALSE(WriteFileBytes("", "y").ok());
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".kiln-partial"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace kiln
