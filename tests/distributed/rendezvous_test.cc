// Rendezvous on localhost: several ranks (threads, and processes in one test) get rank 0's bytes
// over TCP and through shared files; peers that start before rank 0 retry; and every way a job
// can be misconfigured or broken (nobody listening, a wrong world size, a rank claimed twice, a
// rank that never comes, files left by an earlier run) ends every rank with a clear error.
#include "distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/file_rendezvous.h"
#include "distributed/open_rendezvous.h"
#include "distributed/tcp_rendezvous.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

// 128 bytes like an NCCL id, with zeros and high bytes.
std::string Blob() {
  std::string b(128, '\0');
  for (int i = 0; i < 128; ++i) b[i] = static_cast<char>((i * 37 + 5) & 0xff);
  return b;
}

RendezvousOptions Options(int rank, int world, absl::Duration timeout = absl::Seconds(20)) {
  RendezvousOptions o;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

// Runs fn(i) for i in [0, n), one thread each; returns the results.
std::vector<absl::StatusOr<std::string>> OnThreads(
    int n, const std::function<absl::StatusOr<std::string>(int)>& fn) {
  std::vector<absl::StatusOr<std::string>> out(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { out[i] = fn(i); });
  for (std::thread& t : threads) t.join();
  return out;
}

// Rank 0 listening on a free port chosen by the system.
std::unique_ptr<TcpRendezvous> Listen(int world, absl::Duration timeout = absl::Seconds(20)) {
  absl::StatusOr<std::unique_ptr<TcpRendezvous>> r =
      TcpRendezvous::Open("127.0.0.1", 0, Options(0, world, timeout));
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_GT((*r)->port(), 0);
  return std::move(*r);
}

absl::StatusOr<std::string> JoinTcp(int port, int rank, int world,
                                    absl::Duration timeout = absl::Seconds(20)) {
  absl::StatusOr<std::unique_ptr<Rendezvous>> r =
      OpenRendezvous(absl::StrCat("127.0.0.1:", port), Options(rank, world, timeout));
  if (!r.ok()) return r.status();
  return (*r)->ShareFromRankZero("");
}

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

// ---------------------------------------------------------------------------------------------
// Addresses.

TEST(RendezvousTest, ParsesAddresses) {
  auto tcp = ParseRendezvousAddress("node7:29500");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(tcp->kind, RendezvousAddress::Kind::kTcp);
  EXPECT_EQ(tcp->host, "node7");
  EXPECT_EQ(tcp->port, 29500);
  auto scheme = ParseRendezvousAddress("tcp://10.0.0.1:1");
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->host, "10.0.0.1");
  auto v6 = ParseRendezvousAddress("[::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 65535);
  auto file = ParseRendezvousAddress("file:///shared/job1");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->kind, RendezvousAddress::Kind::kFile);
  EXPECT_EQ(file->path, "/shared/job1");
  EXPECT_EQ(ParseRendezvousAddress("file:rel/x")->path, "rel/x");
  for (const char* bad : {"node7", "node7:0", "node7:65536", "node7:http", "::1:80", ":80",
                          "http://x:1", "file:", "[::1]80"}) {
    EXPECT_EQ(ParseRendezvousAddress(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(RendezvousTest, BadOptionsAreInvalidArgument) {
  EXPECT_EQ(OpenRendezvous("127.0.0.1:1", Options(2, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenRendezvous("127.0.0.1:1", Options(0, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenRendezvous("127.0.0.1:1", Options(0, 2, absl::ZeroDuration())).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenRendezvous("file:/no/such/folder/x", Options(0, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// TCP.

TEST(TcpRendezvousTest, FourRanksGetRankZerosBytes) {
  std::unique_ptr<TcpRendezvous> root = Listen(4);
  const int port = root->port();
  auto results = OnThreads(4, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) return root->ShareFromRankZero(Blob());
    return JoinTcp(port, r, 4);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], Blob()) << "rank " << r;
  }
}

TEST(TcpRendezvousTest, PeersStartedBeforeRankZeroRetry) {
  int port = 0;
  {
    std::unique_ptr<TcpRendezvous> probe = Listen(2);  // a free port, released again
    port = probe->port();
  }
  auto results = OnThreads(3, [&](int r) -> absl::StatusOr<std::string> {
    if (r > 0) return JoinTcp(port, r, 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the others are refused
    absl::StatusOr<std::unique_ptr<Rendezvous>> root =
        OpenRendezvous(absl::StrCat("127.0.0.1:", port), Options(0, 3));
    if (!root.ok()) return root.status();
    return (*root)->ShareFromRankZero("late");
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], "late");
  }
}

TEST(TcpRendezvousTest, NobodyListeningIsDeadlineExceededSayingRefused) {
  int port = 0;
  {
    std::unique_ptr<TcpRendezvous> probe = Listen(2);
    port = probe->port();
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> r = JoinTcp(port, 1, 2, absl::Milliseconds(500));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(Contains(r.status(), "refused")) << r.status();
  EXPECT_TRUE(Contains(r.status(), absl::StrCat("127.0.0.1:", port))) << r.status();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
}

TEST(TcpRendezvousTest, WrongWorldSizeFailsEveryRank) {
  std::unique_ptr<TcpRendezvous> root = Listen(2);
  const int port = root->port();
  auto results = OnThreads(2, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) return root->ShareFromRankZero(Blob());
    return JoinTcp(port, 1, 3);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument)
        << results[r].status();
    EXPECT_TRUE(Contains(results[r].status(), "world size is 3; rank 0 says 2"))
        << results[r].status();
  }
}

TEST(TcpRendezvousTest, RankClaimedTwiceFailsEveryRank) {
  std::unique_ptr<TcpRendezvous> root = Listen(3);
  const int port = root->port();
  auto results = OnThreads(3, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) return root->ShareFromRankZero(Blob());
    return JoinTcp(port, /*rank=*/1, 3);  // both peers say rank 1
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument)
        << results[r].status();
    EXPECT_TRUE(Contains(results[r].status(), "rank 1 is claimed twice")) << results[r].status();
  }
}

TEST(TcpRendezvousTest, MissingRankTimesOutOnEveryRankThatCame) {
  std::unique_ptr<TcpRendezvous> root = Listen(3, absl::Milliseconds(600));
  const int port = root->port();
  auto results = OnThreads(2, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) return root->ShareFromRankZero(Blob());
    return JoinTcp(port, 1, 3);  // rank 2 never comes
  });
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(results[0].status(), "missing rank 2")) << results[0].status();
  // Rank 1 learns rank 0's reason rather than waiting out its own (longer) timeout.
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(results[1].status(), "turned away by rank 0")) << results[1].status();
  EXPECT_TRUE(Contains(results[1].status(), "missing rank 2")) << results[1].status();
}

TEST(TcpRendezvousTest, StrayConnectionsAreIgnored) {
  std::unique_ptr<TcpRendezvous> root = Listen(2);
  const int port = root->port();
  auto results = OnThreads(2, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) return root->ShareFromRankZero(Blob());
    // A stranger connects and says something else, then the real rank 1 joins.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const char junk[] = "GET / HTTP/1.0\r\n\r\n";
      (void)!write(fd, junk, sizeof(junk) - 1);
    }
    absl::StatusOr<std::string> joined = JoinTcp(port, 1, 2);
    close(fd);
    return joined;
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(*results[r], Blob());
  }
}

TEST(TcpRendezvousTest, WorksAcrossProcesses) {
  std::unique_ptr<TcpRendezvous> root = Listen(3);
  const int port = root->port();
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      absl::StatusOr<std::string> got = JoinTcp(port, r, 3);
      _exit(got.ok() && *got == Blob() ? 0 : 1);
    }
    children.push_back(pid);
  }
  absl::StatusOr<std::string> mine = root->ShareFromRankZero(Blob());
  ASSERT_TRUE(mine.ok()) << mine.status();
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
}

TEST(TcpRendezvousTest, OneRankNeedsNobody) {
  std::unique_ptr<TcpRendezvous> root = Listen(1);
  absl::StatusOr<std::string> got = root->ShareFromRankZero("alone");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "alone");
}

// ---------------------------------------------------------------------------------------------
// Shared files.

std::string FreshPath(const std::string& name) {
  const std::string path = ScratchFile(name);
  std::filesystem::remove(path);
  for (int r = 0; r < 8; ++r) std::filesystem::remove(absl::StrCat(path, ".rank", r));
  return path;
}

absl::StatusOr<std::string> JoinFile(const std::string& path, int rank, int world,
                                     const std::string& blob = "",
                                     absl::Duration timeout = absl::Seconds(20)) {
  absl::StatusOr<std::unique_ptr<Rendezvous>> r =
      OpenRendezvous(absl::StrCat("file:", path), Options(rank, world, timeout));
  if (!r.ok()) return r.status();
  return (*r)->ShareFromRankZero(blob);
}

TEST(FileRendezvousTest, ThreeRanksGetTheBytesAndTheFilesAreRemoved) {
  const std::string path = FreshPath("rdzv_ok");
  auto results = OnThreads(
      3, [&](int r) { return JoinFile(path, r, 3, r == 0 ? Blob() : std::string("ignored")); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], Blob());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(std::filesystem::exists(absl::StrCat(path, ".rank", r)));
  // The same path works again for the next job.
  auto again = OnThreads(2, [&](int r) { return JoinFile(path, r, 2, "second"); });
  ASSERT_TRUE(again[1].ok()) << again[1].status();
  EXPECT_EQ(*again[1], "second");
}

TEST(FileRendezvousTest, AStaleAnswerIsNotTakenForThisRun) {
  const std::string path = FreshPath("rdzv_stale_answer");
  std::ofstream(path) << "kiln-rendezvous 1 0 0=aaaa 1=bbbb\n"
                      << "6f6c64";  // "old"
  auto results = OnThreads(2, [&](int r) -> absl::StatusOr<std::string> {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return JoinFile(path, r, 2, "new");
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(*results[r], "new");
  }
}

TEST(FileRendezvousTest, ALeftoverRankFileIsAlreadyExists) {
  const std::string path = FreshPath("rdzv_leftover");
  std::ofstream(absl::StrCat(path, ".rank1")) << "kiln-rendezvous 1 2 cafe\n";
  absl::StatusOr<std::string> r = JoinFile(path, 1, 2, "", absl::Milliseconds(300));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  EXPECT_TRUE(Contains(r.status(), "claims rank 1")) << r.status();
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(path, ".rank1")));  // not someone else's
}

TEST(FileRendezvousTest, WrongWorldSizeFailsEveryRank) {
  const std::string path = FreshPath("rdzv_world");
  auto results = OnThreads(2, [&](int r) { return JoinFile(path, r, r == 0 ? 2 : 4, Blob()); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument)
        << results[r].status();
    EXPECT_TRUE(Contains(results[r].status(), "world size is 4; rank 0 says 2"))
        << results[r].status();
  }
}

TEST(FileRendezvousTest, ARankBeyondTheWorldFailsEveryRank) {
  const std::string path = FreshPath("rdzv_beyond");
  auto results = OnThreads(
      2, [&](int i) { return i == 0 ? JoinFile(path, 0, 2, Blob()) : JoinFile(path, 3, 4); });
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(results[0].status(), "rank 3 joined")) << results[0].status();
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kInvalidArgument) << results[1].status();
}

TEST(FileRendezvousTest, MissingRankTimesOut) {
  const std::string path = FreshPath("rdzv_missing");
  auto results = OnThreads(2, [&](int r) {
    return JoinFile(path, r, 3, Blob(), absl::Milliseconds(400));  // rank 2 never comes
  });
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(results[0].status(), "missing rank 2")) << results[0].status();
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(std::filesystem::exists(absl::StrCat(path, ".rank1")));
}

}  // namespace
}  // namespace kiln
