#include "pjrt/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace shardrt::pjrt {
namespace {

// Whether [offset, offset + size) lies inside a file of `file_size` bytes.
bool Inside(uint64_t offset, uint64_t size, uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

}  // namespace

absl::StatusOr<uint64_t> FindElfFunction(const std::string& path,
                                         absl::FunctionRef<bool(absl::string_view)> matches,
                                         absl::string_view name_contains) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st {};
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat '", path, "'"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < sizeof(Elf64_Ehdr)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is too short to be ELF"));
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("cannot map '", path, "'"));
  absl::Cleanup unmap = [mapped, size] { ::munmap(mapped, size); };
  const auto* bytes = static_cast<const unsigned char*>(mapped);

  Elf64_Ehdr header;
  std::memcpy(&header, bytes, sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a 64-bit little-endian ELF file"));
  }
  if (header.e_shentsize != sizeof(Elf64_Shdr) ||
      !Inside(header.e_shoff, uint64_t{header.e_shnum} * sizeof(Elf64_Shdr), size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': its section headers lie outside the file"));
  }
  auto section = [&](uint64_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, bytes + header.e_shoff + i * sizeof(Elf64_Shdr), sizeof(s));
    return s;
  };
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_SYMTAB) continue;
    if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= header.e_shnum ||
        !Inside(symtab.sh_offset, symtab.sh_size, size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "': its symbol table lies outside the file"));
    }
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (strtab.sh_type != SHT_STRTAB || !Inside(strtab.sh_offset, strtab.sh_size, size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "': its symbol names lie outside the file"));
    }
    const char* names = reinterpret_cast<const char*>(bytes + strtab.sh_offset);
    const absl::string_view table(names, strtab.sh_size);
    // With a hint: the [start, end) offsets of the names that hold it (a symbol's name may
    // also start inside one of them, at a shared suffix).
    std::vector<std::pair<uint64_t, uint64_t>> candidates;
    if (!name_contains.empty()) {
      // glibc's memmem (two-way, vectorized) over the table: a few milliseconds for 60 MB.
      auto find = [&](size_t from) -> size_t {
        if (from >= table.size()) return absl::string_view::npos;
        const void* hit = ::memmem(table.data() + from, table.size() - from, name_contains.data(),
                                   name_contains.size());
        return hit == nullptr ? absl::string_view::npos
                              : static_cast<size_t>(static_cast<const char*>(hit) - table.data());
      };
      for (size_t at = find(0); at != absl::string_view::npos; at = find(at + 1)) {
        const size_t start = table.rfind('\0', at);
        const size_t end = table.find('\0', at);
        candidates.emplace_back(start == absl::string_view::npos ? 0 : start + 1,
                                end == absl::string_view::npos ? table.size() : end);
      }
      if (candidates.empty()) continue;
    }
    auto is_candidate = [&](uint64_t name) {
      if (name_contains.empty()) return true;
      auto it = std::upper_bound(candidates.begin(), candidates.end(), name,
                                 [](uint64_t n, const auto& c) { return n < c.first; });
      return it != candidates.begin() && name < std::prev(it)->second;
    };
    const uint64_t count = symtab.sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < count; ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes + symtab.sh_offset + k * sizeof(Elf64_Sym), sizeof(sym));
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
          sym.st_value == 0 || sym.st_name >= strtab.sh_size || !is_candidate(sym.st_name)) {
        continue;
      }
      const char* name = names + sym.st_name;
      const size_t length = ::strnlen(name, strtab.sh_size - sym.st_name);
      if (matches(absl::string_view(name, length))) return sym.st_value;
    }
  }
  return absl::NotFoundError(absl::StrCat("'", path, "' has no matching function in its symbol table"));
}

}  // namespace shardrt::pjrt
