// FileKind names what stat(2) and lstat(2) report for real files of each kind, made here in a
// temporary folder (and /dev/null for a character device).
#include "shardrt/base/file_kind.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace shardrt {
namespace {

namespace fs = std::filesystem;

// The kind of what `path` names itself (a symbolic link is not followed).
std::string KindOf(const fs::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return std::string("lstat failed: ") + std::strerror(errno);
  return std::string(FileKind(st.st_mode));
}

TEST(FileKindTest, NamesEachKindOfFileAsStatReportsIt) {
  const fs::path dir = fs::path(testing::TempDir()) / ("file_kind_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(fs::create_directories(dir));
  std::ofstream(dir / "regular") << "x";
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0) << std::strerror(errno);
  fs::create_symlink(dir / "regular", dir / "link");

  EXPECT_EQ(KindOf(dir / "regular"), "a regular file");
  EXPECT_EQ(KindOf(dir), "a directory");
  EXPECT_EQ(KindOf(dir / "fifo"), "a FIFO");
  EXPECT_EQ(KindOf(dir / "link"), "a symbolic link");
  EXPECT_EQ(KindOf("/dev/null"), "a character device");

  // A socket bound to a path is a file of its own kind. (sun_path is short: a relative name.)
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, "sock");
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  fs::current_path(cwd);
  ASSERT_EQ(bound, 0) << std::strerror(errno);
  EXPECT_EQ(KindOf(dir / "sock"), "a socket");
  close(fd);

  // The mode bits of a block device, and bits that name no kind at all.
  EXPECT_EQ(FileKind(S_IFBLK | 0600), "a block device");
  EXPECT_EQ(FileKind(0), "a special file");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shardrt
