// read_regular_file: regular files only, a size limit, and an open() that never blocks.
#include "control/common/file_read.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "tests/support/temp_dir.h"

namespace meshgate::ctl {
namespace {

namespace fs = std::filesystem;

class FileReadTest : public testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

  const test::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

TEST_F(FileReadTest, RegularFileIsReadWhole) {
  const std::string p = write("a.toml", "workers = 1\n");
  auto r = read_regular_file(p, 1024);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "workers = 1\n");
}

TEST_F(FileReadTest, EmptyFileIsAnEmptyString) {
  auto r = read_regular_file(write("empty", ""), 1024);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "");
}

TEST_F(FileReadTest, FileOfExactlyTheLimitIsRead) {
  auto r = read_regular_file(write("exact", std::string(100, 'x')), 100);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->size(), 100u);
}

TEST_F(FileReadTest, FileOneByteOverTheLimitIsRefused) {
  auto r = read_regular_file(write("over", std::string(101, 'x')), 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kTooLarge);
  EXPECT_EQ(r.error().message, "is larger than 100 bytes");
}

TEST_F(FileReadTest, SparseFileLargerThanTheLimitIsRefusedWithoutReadingIt) {
  const std::string p = (dir_ / "sparse").string();
  { std::ofstream(p) << ""; }
  // 64 GiB of holes: reading it would take minutes and all memory.
  ASSERT_EQ(truncate(p.c_str(), off_t(64) << 30), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = read_regular_file(p, kMaxConfigFileBytes);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kTooLarge);
  EXPECT_EQ(r.error().str(p), p + ": is larger than 16777216 bytes");
}

TEST_F(FileReadTest, DirectoryIsRefusedAsADirectory) {
  auto r = read_regular_file(dir_.string(), 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kDirectory);
  EXPECT_EQ(r.error().message, "is a directory");
}

TEST_F(FileReadTest, DevZeroIsRefusedAsNotARegularFile) {
  auto r = read_regular_file("/dev/zero", kMaxMeshFileBytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kNotRegular);
  EXPECT_EQ(r.error().message, "is not a regular file (a character device)");
}

TEST_F(FileReadTest, SymlinkToDevZeroIsRefused) {
  const fs::path link = dir_ / "mesh.toml";
  fs::create_symlink("/dev/zero", link);
  auto r = read_regular_file(link.string(), kMaxMeshFileBytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kNotRegular);
}

TEST_F(FileReadTest, SymlinkToARegularFileIsFollowed) {
  const std::string target = write("real.toml", "x = 1\n");
  const fs::path link = dir_ / "link.toml";
  fs::create_symlink(target, link);
  auto r = read_regular_file(link.string(), 1024);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "x = 1\n");
}

TEST_F(FileReadTest, FifoWithoutAWriterIsRefusedWithoutBlocking) {
  const std::string p = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  // On a thread of its own, so a blocking open() fails the test instead of hanging it.
  auto f = std::async(std::launch::async, [&] { return read_regular_file(p, 1024); });
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Release the blocked open() (a writer appears and leaves) so the test ends.
    const int w = open(p.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) close(w);
    f.wait();
    FAIL() << "read_regular_file blocked on a FIFO";
  }
  auto r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kNotRegular);
  EXPECT_EQ(r.error().message, "is not a regular file (a FIFO)");
}

TEST_F(FileReadTest, MissingFileSaysItCannotBeOpened) {
  auto r = read_regular_file((dir_ / "absent").string(), 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, FileReadError::kOpen);
  EXPECT_EQ(r.error().message, "cannot be opened: No such file or directory");
}

}  // namespace
}  // namespace meshgate::ctl
