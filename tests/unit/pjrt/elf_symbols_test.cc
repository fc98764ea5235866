// FindElfFunction: a function's link-time address from a file's full symbol table, checked
// against where the dynamic loader put the function in this very process; files that are not
// ELF, or whose tables lie outside them, are clean errors.
#include "pjrt/elf_symbols.h"

#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardrt::pjrt {
namespace {

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::string WriteTemp(const std::vector<char>& bytes) {
  char name[] = "/tmp/shardrt_elf_test_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return name;
}

// The mangled name of FindElfFunction itself, as this test binary's symbol table has it.
bool IsFindElfFunction(absl::string_view name) {
  return absl::StartsWith(name, "_ZN7shardrt4pjrt15FindElfFunction") &&
         !absl::StrContains(name, ".");  // not a split-off part (.cold)
}

TEST(ElfSymbolsTest, FindsAFunctionWhereTheLoaderPutIt) {
  absl::StatusOr<uint64_t> value = FindElfFunction("/proc/self/exe", IsFindElfFunction);
  ASSERT_TRUE(value.ok()) << value.status();
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&FindElfFunction), &info), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.dli_fbase) + *value,
            reinterpret_cast<uintptr_t>(&FindElfFunction));
}

// With a hint the same function is found, by a search of the name table; a hint that no name
// holds finds nothing.
TEST(ElfSymbolsTest, AHintFindsTheSameFunction) {
  absl::StatusOr<uint64_t> plain = FindElfFunction("/proc/self/exe", IsFindElfFunction);
  absl::StatusOr<uint64_t> hinted =
      FindElfFunction("/proc/self/exe", IsFindElfFunction, "15FindElfFunction");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(hinted.ok()) << hinted.status();
  EXPECT_EQ(*hinted, *plain);
  EXPECT_EQ(FindElfFunction("/proc/self/exe", IsFindElfFunction, "NoSuchName12345").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ElfSymbolsTest, NoMatchIsNotFound) {
  absl::StatusOr<uint64_t> value =
      FindElfFunction("/proc/self/exe", [](absl::string_view) { return false; });
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound) << value.status();
}

TEST(ElfSymbolsTest, FilesThatAreNotElfOrWhoseTablesLieOutsideAreInvalid) {
  const std::string text = WriteTemp(std::vector<char>(200, 'x'));
  EXPECT_EQ(FindElfFunction(text, IsFindElfFunction).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string tiny = WriteTemp(std::vector<char>(10, '\x7f'));
  EXPECT_EQ(FindElfFunction(tiny, IsFindElfFunction).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindElfFunction("/nonexistent/file", IsFindElfFunction).status().code(),
            absl::StatusCode::kNotFound);

  const std::vector<char> self = ReadFile("/proc/self/exe");
  ASSERT_GT(self.size(), sizeof(Elf64_Ehdr));
  // Cut before the section headers.
  Elf64_Ehdr header;
  std::memcpy(&header, self.data(), sizeof(header));
  ASSERT_LT(header.e_shoff, self.size());
  const std::string cut = WriteTemp(std::vector<char>(self.begin(), self.begin() + header.e_shoff));
  absl::StatusOr<uint64_t> from_cut = FindElfFunction(cut, IsFindElfFunction);
  EXPECT_EQ(from_cut.status().code(), absl::StatusCode::kInvalidArgument) << from_cut.status();
  EXPECT_TRUE(absl::StrContains(from_cut.status().message(), "section headers lie outside"))
      << from_cut.status();
  // A symbol table whose offset points past the end.
  std::vector<char> moved = self;
  bool found = false;
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    char* at = moved.data() + header.e_shoff + i * sizeof(Elf64_Shdr);
    std::memcpy(&section, at, sizeof(section));
    if (section.sh_type != SHT_SYMTAB) continue;
    section.sh_offset = moved.size();
    std::memcpy(at, &section, sizeof(section));
    found = true;
  }
  ASSERT_TRUE(found) << "the test binary has a symbol table";
  absl::StatusOr<uint64_t> from_moved = FindElfFunction(WriteTemp(moved), IsFindElfFunction);
  EXPECT_EQ(from_moved.status().code(), absl::StatusCode::kInvalidArgument) << from_moved.status();
  EXPECT_TRUE(absl::StrContains(from_moved.status().message(), "symbol table lies outside"))
      << from_moved.status();
}

}  // namespace
}  // namespace shardrt::pjrt
