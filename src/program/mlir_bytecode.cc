#include "program/mlir_bytecode.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"

namespace shardrt {
namespace {

// Section ids of the format; ids from kNumSections on are refused by the compiler's reader.
constexpr uint8_t kAttrTypeSection = 2;
constexpr uint8_t kAttrTypeOffsetSection = 3;
constexpr uint8_t kNumSections = 9;
constexpr uint8_t kPaddingByte = 0xCB;

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed MLIR bytecode: ", what));
}

// A bounded cursor over bytes; every read checks what is left.
class Reader {
 public:
  Reader(absl::string_view data, size_t base = 0) : data_(data), base_(base) {}

  bool done() const { return pos_ == data_.size(); }
  size_t offset() const { return base_ + pos_; }  // from the start of the program

  absl::StatusOr<uint8_t> Byte(absl::string_view what) {
    if (done()) return Malformed(absl::StrCat(what, " runs past the end of its data"));
    return static_cast<uint8_t>(data_[pos_++]);
  }

  // A PrefixVarInt: the trailing zero bits of the first byte count the bytes that follow
  // (a zero first byte: eight bytes follow).
  absl::StatusOr<uint64_t> VarInt(absl::string_view what) {
    SHARDRT_ASSIGN_OR_RETURN(const uint8_t first, Byte(what));
    if (first & 1) return uint64_t{first} >> 1;
    const int extra = first == 0 ? 8 : __builtin_ctz(first);
    if (data_.size() - pos_ < static_cast<size_t>(extra)) {
      return Malformed(absl::StrCat(what, " (a varint) runs past the end of its data"));
    }
    uint64_t value = 0;
    for (int i = 0; i < extra; ++i) {
      value |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    }
    pos_ += extra;
    if (first == 0) return value;
    // The first byte's bits above its marker are the low bits of the value.
    return (value << (7 - extra)) | (uint64_t{first} >> (extra + 1));
  }

  absl::StatusOr<absl::string_view> Bytes(uint64_t n, absl::string_view what) {
    if (n > data_.size() - pos_) {
      return Malformed(absl::StrCat(what, " of ", n, " bytes runs past the end of its data (",
                                    data_.size() - pos_, " left)"));
    }
    absl::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  // Up to and without the next NUL, which is consumed.
  absl::StatusOr<absl::string_view> CString(absl::string_view what) {
    const size_t nul = data_.find('\0', pos_);
    if (nul == absl::string_view::npos) return Malformed(absl::StrCat(what, " has no NUL"));
    absl::string_view out = data_.substr(pos_, nul - pos_);
    pos_ = nul + 1;
    return out;
  }

  // Padding bytes up to a multiple of `alignment` from the start of the program (the writer
  // aligns there; the reader needs the buffer aligned as much).
  absl::Status AlignTo(uint64_t alignment, absl::string_view what) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return Malformed(absl::StrCat(what, " has alignment ", alignment,
                                    ", expected a power of two"));
    }
    while (offset() % alignment != 0) {
      SHARDRT_ASSIGN_OR_RETURN(const uint8_t b, Byte(what));
      if (b != kPaddingByte) {
        return Malformed(absl::StrCat(what, ": padding byte ", static_cast<int>(b),
                                      ", expected 0xCB"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::string_view data_;
  size_t base_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<MlirBytecodeAsmEntry>> MlirBytecodeAsmEntries(
    absl::string_view program) {
  Reader file(program);
  SHARDRT_RETURN_IF_ERROR(file.Bytes(4, "the magic").status());
  SHARDRT_RETURN_IF_ERROR(file.VarInt("the version").status());
  SHARDRT_RETURN_IF_ERROR(file.CString("the producer string").status());

  std::optional<Reader> entries, offsets;
  while (!file.done()) {
    SHARDRT_ASSIGN_OR_RETURN(const uint8_t id_and_aligned, file.Byte("a section id"));
    const uint8_t id = id_and_aligned & 0x7F;
    const std::string what = absl::StrCat("section ", static_cast<int>(id));
    if (id >= kNumSections) return Malformed(absl::StrCat("unknown section id ", int{id}));
    SHARDRT_ASSIGN_OR_RETURN(const uint64_t length, file.VarInt(what));
    if (id_and_aligned & 0x80) {
      SHARDRT_ASSIGN_OR_RETURN(const uint64_t alignment, file.VarInt(what));
      SHARDRT_RETURN_IF_ERROR(file.AlignTo(alignment, what));
    }
    const size_t start = file.offset();
    SHARDRT_ASSIGN_OR_RETURN(const absl::string_view data, file.Bytes(length, what));
    if (id == kAttrTypeSection) entries.emplace(data, start);
    if (id == kAttrTypeOffsetSection) offsets.emplace(data, start);
  }
  std::vector<MlirBytecodeAsmEntry> out;
  if (!offsets.has_value()) return out;  // no attributes or types
  if (!entries.has_value()) entries.emplace(absl::string_view(), 0);

  SHARDRT_ASSIGN_OR_RETURN(const uint64_t num_attrs, offsets->VarInt("numAttrs"));
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t num_types, offsets->VarInt("numTypes"));
  // Groups of one dialect's entries: attributes first, then types. Each entry takes at least a
  // byte of the offset section, so the loops are bounded by its length.
  for (const auto& [kind, count] :
       {std::pair{MlirBytecodeAsmEntry::Kind::kAttribute, num_attrs},
        std::pair{MlirBytecodeAsmEntry::Kind::kType, num_types}}) {
    const absl::string_view noun =
        kind == MlirBytecodeAsmEntry::Kind::kAttribute ? "attribute" : "type";
    uint64_t index = 0;
    while (index < count) {
      SHARDRT_RETURN_IF_ERROR(offsets->VarInt("a dialect of the offset section").status());
      SHARDRT_ASSIGN_OR_RETURN(const uint64_t in_group,
                               offsets->VarInt("an entry count of the offset section"));
      if (in_group > count - index) {
        return Malformed(absl::StrCat("the offset section lists more than ", count, " ",
                                      noun, "s"));
      }
      for (uint64_t i = 0; i < in_group; ++i, ++index) {
        const std::string what = absl::StrCat(noun, " ", index);
        SHARDRT_ASSIGN_OR_RETURN(const uint64_t size_and_custom, offsets->VarInt(what));
        SHARDRT_ASSIGN_OR_RETURN(const absl::string_view bytes,
                                 entries->Bytes(size_and_custom >> 1, what));
        if (size_and_custom & 1) continue;  // a dialect's own encoding
        Reader entry(bytes);
        SHARDRT_ASSIGN_OR_RETURN(const absl::string_view text, entry.CString(what));
        out.push_back({kind, static_cast<int64_t>(index), text});
      }
    }
  }
  return out;
}

}  // namespace shardrt
