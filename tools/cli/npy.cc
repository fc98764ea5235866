#include "cli/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/file_io.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::cli {
namespace {

static_assert(std::endian::native == std::endian::little,
              "NpyArray data is little-endian; a big-endian host needs byte swapping");

constexpr absl::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kAlignment = 64;  // NumPy pads the header so the data starts aligned
constexpr size_t kMaxV1HeaderLength = 0xFFFF;

// An InvalidArgument status with `message`.
absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// Header bytes shown in a message: escaped, and cut when long.
std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 40;
  std::string shown = absl::CHexEscape(text.substr(0, kMax));
  return absl::StrCat("'", shown, text.size() > kMax ? "...'" : "'");
}

// ---------------------------------------------------------------------------------------------
// dtypes

struct Dtype {
  char kind;  // NumPy's kind character
  int size;
  ElementType type;
};

constexpr Dtype kDtypes[] = {
    {'b', 1, ElementType::kPred}, {'i', 1, ElementType::kS8},  {'i', 2, ElementType::kS16},
    {'i', 4, ElementType::kS32},  {'i', 8, ElementType::kS64}, {'u', 1, ElementType::kU8},
    {'u', 2, ElementType::kU16},  {'u', 4, ElementType::kU32}, {'u', 8, ElementType::kU64},
    {'f', 2, ElementType::kF16},  {'f', 4, ElementType::kF32}, {'f', 8, ElementType::kF64},
};

// The error for bf16, on read and on write.
absl::Status Bf16NotSupported() {
  return Invalid(
      "bf16 .npy files are not supported: NumPy has no standard bfloat16 dtype; store the "
      "array as f32 instead");
}

// '<f4' -> kF32. Accepts '<' and '=' (this host is little-endian) for any size, and '|' or '>'
// for one-byte types, where byte order does not matter.
absl::StatusOr<ElementType> ParseDescr(absl::string_view descr) {
  const std::string quoted = Quote(descr);
  if (descr.size() < 3 || descr.size() > 4) {
    return Invalid(absl::StrCat("unsupported dtype ", quoted));
  }
  const char order = descr[0];
  const char kind = descr[1];
  int size = 0;
  for (const char c : descr.substr(2)) {
    if (c < '0' || c > '9') return Invalid(absl::StrCat("unsupported dtype ", quoted));
    size = size * 10 + (c - '0');
  }
  if (order != '<' && order != '>' && order != '=' && order != '|') {
    return Invalid(absl::StrCat("unsupported dtype ", quoted, ": unknown byte order"));
  }
  if (kind == 'V' && size == 2) {
    return Invalid(absl::StrCat("unsupported dtype ", quoted,
                                " (opaque 2-byte values, e.g. an ml_dtypes bfloat16 array); ",
                                Bf16NotSupported().message()));
  }
  const Dtype* found = nullptr;
  for (const Dtype& dtype : kDtypes) {
    if (dtype.kind == kind && dtype.size == size) found = &dtype;
  }
  if (found == nullptr) {
    return Invalid(absl::StrCat("unsupported dtype ", quoted,
                                " (supported: bool, int8-64, uint8-64, float16/32/64)"));
  }
  if (size > 1 && order == '>') {
    return Invalid(absl::StrCat("big-endian dtype ", quoted,
                                " is not supported; save it as little-endian, e.g. "
                                "arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  if (size > 1 && order == '|') {
    return Invalid(absl::StrCat("dtype ", quoted, " has no byte order ('|') for a ", size,
                                "-byte type"));
  }
  return found->type;
}

// kF32 -> '<f4', as NumPy writes it. Error (InvalidArgument): bf16 or a type .npy lacks.
absl::StatusOr<std::string> DescrOf(ElementType type) {
  if (type == ElementType::kBF16) return Bf16NotSupported();
  for (const Dtype& dtype : kDtypes) {
    if (dtype.type == type) {
      return absl::StrCat(dtype.size == 1 ? "|" : "<", std::string(1, dtype.kind), dtype.size);
    }
  }
  return Invalid(absl::StrCat("cannot write element type ", ElementTypeName(type), " to .npy"));
}

// product(shape), or an error on a negative dimension or int64 overflow (SerializeNpy's check;
// ParseNpy holds shapes to ArrayBytes instead).
absl::StatusOr<int64_t> NumElements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) return Invalid(absl::StrCat("negative dimension ", dim, " in shape"));
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) {
      return Invalid(absl::StrCat("shape (", absl::StrJoin(shape, ", "), ") is too large"));
    }
    count *= dim;
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// A cursor over the header text; every read is bounds-checked.
class HeaderParser {
 public:
  // `text` must outlive the parser.
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  // Parses the whole dict. Errors (InvalidArgument): "malformed header: ..." with the offset, a
  // missing key, a structured dtype, or a rank above limits::kMaxRank.
  absl::StatusOr<Header> Parse() {
    Header header;
    bool has_descr = false, has_order = false, has_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      SHARDRT_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      if (key == "descr") {
        if (has_descr) return Error("duplicate key 'descr'");
        if (Peek() == '[') return Invalid("structured dtypes (a descr list) are not supported");
        SHARDRT_ASSIGN_OR_RETURN(header.descr, ParseString());
        has_descr = true;
      } else if (key == "fortran_order") {
        if (has_order) return Error("duplicate key 'fortran_order'");
        SHARDRT_ASSIGN_OR_RETURN(header.fortran_order, ParseBool());
        has_order = true;
      } else if (key == "shape") {
        if (has_shape) return Error("duplicate key 'shape'");
        SHARDRT_ASSIGN_OR_RETURN(header.shape, ParseShape());
        has_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key ", Quote(key)));
      }
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != '\0') {
        return Error("unexpected text after the dict");
      }
    }
    if (!has_descr || !has_order || !has_shape) {
      return Invalid(absl::StrCat("header lacks the key '",
                                  !has_descr ? "descr" : !has_order ? "fortran_order" : "shape",
                                  "'"));
    }
    return header;
  }

 private:
  // The next character, or '\0' at the end.
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  // Steps over `c` if it comes next; says whether it did.
  bool Consume(char c) {
    if (Peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  // Steps over spaces, tabs and line ends.
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // A "malformed header" error at the current offset.
  absl::Status Error(absl::string_view what) const {
    return Invalid(absl::StrCat("malformed header: ", what, " at offset ", pos_, " in ",
                                Quote(text_)));
  }

  // 'text' or "text", without escapes (NumPy's keys and dtype strings need none).
  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return Error("escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }

  // Python's True or False.
  absl::StatusOr<bool> ParseBool() {
    if (absl::StartsWith(text_.substr(pos_), "True")) {
      pos_ += 4;
      return true;
    }
    if (absl::StartsWith(text_.substr(pos_), "False")) {
      pos_ += 5;
      return false;
    }
    return Error("expected True or False");
  }

  // A non-negative integer; Python 2 headers may end it with 'L'.
  absl::StatusOr<int64_t> ParseDim() {
    if (Peek() == '-') return Error("negative dimension");
    if (Peek() < '0' || Peek() > '9') return Error("expected a dimension");
    int64_t value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      const int digit = Peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return Error("dimension too large");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    Consume('L');
    return value;
  }

  // (), (3,), (2, 3) and (2, 3,). Keeps at most limits::kMaxRank dimensions but counts them
  // all, so that the error names the rank the header declares.
  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Error("expected '(' to open the shape");
    std::vector<int64_t> shape;
    SkipSpace();
    if (Consume(')')) return shape;
    int64_t rank = 0;
    while (true) {
      SkipSpace();
      SHARDRT_ASSIGN_OR_RETURN(int64_t dim, ParseDim());
      if (++rank <= limits::kMaxRank) shape.push_back(dim);
      SkipSpace();
      if (Consume(')')) break;
      if (!Consume(',')) return Error("expected ',' or ')' in the shape");
      SkipSpace();
      if (Consume(')')) break;
    }
    if (rank > limits::kMaxRank) {
      return Invalid(absl::StrCat("shape has rank ", rank, ", more than limits::kMaxRank (",
                                  limits::kMaxRank, ")"));
    }
    return shape;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// The unsigned little-endian integer of `width` (at most 4) bytes at `offset`; the caller
// checks the bounds.
uint32_t ReadLittleEndian(absl::string_view bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// Fortran (column-major) element order to row-major: `in` holds `count` elements of
// `element_size` bytes, `count` being product(shape). Returns a new row-major copy.
std::vector<uint8_t> FortranToRowMajor(const uint8_t* in, const std::vector<int64_t>& shape,
                                       int64_t count, size_t element_size) {
  std::vector<uint8_t> out(static_cast<size_t>(count) * element_size);
  const size_t rank = shape.size();
  std::vector<int64_t> f_strides(rank);  // in elements
  int64_t stride = 1;
  for (size_t d = 0; d < rank; ++d) {
    f_strides[d] = stride;
    stride *= shape[d];
  }
  std::vector<int64_t> index(rank, 0);
  int64_t f_offset = 0;
  for (int64_t c = 0; c < count; ++c) {
    std::memcpy(out.data() + static_cast<size_t>(c) * element_size,
                in + static_cast<size_t>(f_offset) * element_size, element_size);
    for (size_t d = rank; d-- > 0;) {  // advance the row-major index, last dimension fastest
      f_offset += f_strides[d];
      if (++index[d] < shape[d]) break;
      f_offset -= f_strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return out;
}

// (2, 3), (5,) or (), as Python prints a tuple.
std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

// `status` with "path: " in front of its message.
absl::Status WithPath(const absl::Status& status, const std::string& path) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

// Bytes of the element data of `type` and `shape` (no dimension negative), held to
// limits::kMaxArrayBytes by NumPy's rule: the element size times the product of the nonzero
// dimensions must stay within it, so that no product of dimensions overflows, in any order and
// whether or not a dimension is zero.
// Error (InvalidArgument): "s32 (...) takes more than limits::kMaxArrayBytes (N) bytes".
absl::StatusOr<int64_t> ArrayBytes(ElementType type, const std::vector<int64_t>& shape) {
  const bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t bytes = ElementSizeInBytes(type);
  for (const int64_t dim : shape) {
    if (dim == 0) continue;
    if (bytes > limits::kMaxArrayBytes / dim) {
      return Invalid(absl::StrCat(
          ElementTypeName(type), " ", ShapeText(shape), " takes more than limits::kMaxArrayBytes (",
          limits::kMaxArrayBytes, ") bytes",
          has_zero ? " (counting its nonzero dimensions, as NumPy does)" : ""));
    }
    bytes *= dim;
  }
  return has_zero ? 0 : bytes;
}

// OK when each of the `count` one-byte bool elements at `data` is 0 or 1. `data` is in file
// order: Fortran order when `fortran`, then the error names the row-major index all the same.
// Error (InvalidArgument): "bool element I (row-major index) is B, expected 0 or 1" for the
// first other byte.
absl::Status CheckBools(const uint8_t* data, int64_t count, const std::vector<int64_t>& shape,
                        bool fortran) {
  const uint8_t* bad = std::find_if(data, data + count, [](uint8_t b) { return b > 1; });
  if (bad == data + count) return absl::OkStatus();
  int64_t index = bad - data;
  if (fortran && shape.size() > 1) {
    // Unravel the column-major index (first dimension fastest), ravel it row-major. Every
    // dimension is positive here, since the array holds an element.
    std::vector<int64_t> position(shape.size());
    int64_t rest = index;
    for (size_t d = 0; d < shape.size(); ++d) {
      position[d] = rest % shape[d];
      rest /= shape[d];
    }
    index = 0;
    for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + position[d];
  }
  return Invalid(absl::StrCat("bool element ", index, " (row-major index) is ",
                              static_cast<int>(*bad), ", expected 0 or 1"));
}


}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < kMagic.size() + 2 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Invalid(absl::StrCat("not a .npy file: bad magic ", Quote(bytes.substr(0, 8)),
                                " (expected '\\x93NUMPY' and a version)"));
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Invalid(absl::StrCat("unsupported .npy format version ", major, ".", minor,
                                " (supported: 1.0, 2.0, 3.0)"));
  }
  const size_t length_width = major == 1 ? 2 : 4;
  const size_t header_start = kMagic.size() + 2 + length_width;
  if (bytes.size() < header_start) {
    return Invalid(absl::StrCat("truncated header: expected at least ", header_start,
                                " bytes, got ", bytes.size()));
  }
  const size_t header_length = ReadLittleEndian(bytes, kMagic.size() + 2, length_width);
  if (header_length > bytes.size() - header_start) {
    return Invalid(absl::StrCat("truncated header: expected ", header_length, " bytes, got ",
                                bytes.size() - header_start));
  }
  SHARDRT_ASSIGN_OR_RETURN(
      Header header, HeaderParser(bytes.substr(header_start, header_length)).Parse());

  NpyArray array;
  SHARDRT_ASSIGN_OR_RETURN(array.type, ParseDescr(header.descr));
  array.shape = std::move(header.shape);
  // Every check below comes before the data is copied, so nothing is allocated for an array
  // that is refused.
  SHARDRT_ASSIGN_OR_RETURN(const int64_t data_bytes, ArrayBytes(array.type, array.shape));
  const size_t element_size = static_cast<size_t>(ElementSizeInBytes(array.type));
  const int64_t count = data_bytes / static_cast<int64_t>(element_size);
  const size_t available = bytes.size() - header_start - header_length;
  if (static_cast<uint64_t>(data_bytes) != available) {
    return Invalid(absl::StrCat("expected ", data_bytes, " bytes of data for ",
                                ElementTypeName(array.type), " ", ShapeText(array.shape),
                                ", got ", available));
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data() + header_start + header_length);
  if (array.type == ElementType::kPred) {
    SHARDRT_RETURN_IF_ERROR(CheckBools(data, count, array.shape, header.fortran_order));
  }
  if (header.fortran_order && array.shape.size() > 1) {
    array.data = FortranToRowMajor(data, array.shape, count, element_size);
  } else {
    array.data.assign(data, data + available);
  }
  return array;
}

absl::StatusOr<std::string> SerializeNpy(const NpyArray& array) {
  SHARDRT_ASSIGN_OR_RETURN(const std::string descr, DescrOf(array.type));
  SHARDRT_ASSIGN_OR_RETURN(const int64_t count, NumElements(array.shape));
  const uint64_t element_size = static_cast<uint64_t>(ElementSizeInBytes(array.type));
  if (static_cast<uint64_t>(count) > array.data.size() / element_size ||
      static_cast<uint64_t>(count) * element_size != array.data.size()) {
    return Invalid(absl::StrCat("data holds ", array.data.size(), " bytes, but ",
                                ElementTypeName(array.type), " ", ShapeText(array.shape),
                                " needs ", count, " x ", element_size));
  }
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  ShapeText(array.shape), ", }");
  // Version 1.0 stores the header length in 2 bytes, 2.0 in 4.
  int major = 1;
  size_t prefix = kMagic.size() + 2 + 2;
  if (prefix + dict.size() + 1 + kAlignment > kMaxV1HeaderLength) {
    major = 2;
    prefix = kMagic.size() + 2 + 4;
  }
  const size_t padding = (kAlignment - (prefix + dict.size() + 1) % kAlignment) % kAlignment;
  const size_t header_length = dict.size() + padding + 1;

  std::string out;
  out.reserve(prefix + header_length + array.data.size());
  out.append(kMagic.data(), kMagic.size());
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < prefix - kMagic.size() - 2; ++i) {
    out.push_back(static_cast<char>((header_length >> (8 * i)) & 0xFF));
  }
  out += dict;
  out.append(padding, ' ');
  out.push_back('\n');
  out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return out;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  SHARDRT_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path));
  absl::StatusOr<NpyArray> array = ParseNpy(bytes);
  if (!array.ok()) return WithPath(array.status(), path);
  return array;
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  if (!bytes.ok()) return WithPath(bytes.status(), path);
  return WriteFileReplacing(path, *bytes);
}

// ---------------------------------------------------------------------------------------------
// NpyRowWriter

namespace {

// Writes `size` bytes at `data` to `fd` at `offset` (or at its position when offset < 0),
// retrying on EINTR and short writes. Returns 0, or the errno value of the failure.
int WriteAll(int fd, const void* data, size_t size, off_t offset = -1) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = offset < 0 ? ::write(fd, p, size) : ::pwrite(fd, p, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    p += n;
    size -= static_cast<size_t>(n);
    if (offset >= 0) offset += n;
  }
  return 0;
}

}  // namespace

NpyRowWriter::NpyRowWriter(std::string path, std::string temp_path, int fd)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

NpyRowWriter::~NpyRowWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(temp_path_.c_str());
}

absl::StatusOr<std::unique_ptr<NpyRowWriter>> NpyRowWriter::Create(const std::string& path) {
  // A new name: a stale file of another process with this pid is never reused.
  constexpr int kTries = 100;
  for (int i = 0;; ++i) {
    std::string temp = absl::StrCat(path, ".partial-", ::getpid(), "-", i);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd >= 0) {
      return std::unique_ptr<NpyRowWriter>(new NpyRowWriter(path, std::move(temp), fd));
    }
    if (errno != EEXIST || i + 1 == kTries) {
      return IoError(path, absl::StrCat("cannot create ", temp), errno);
    }
  }
}

absl::StatusOr<std::string> NpyRowWriter::Header(int64_t rows) const {
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), row_shape_.begin(), row_shape_.end());
  const std::string dict = absl::StrCat("{'descr': '", descr_, "', 'fortran_order': False, 'shape': ",
                                        ShapeText(shape), ", }");
  const size_t v1_prefix = kMagic.size() + 2 + 2;
  size_t total = header_length_;
  if (total == 0) total = (v1_prefix + dict.size() + 1 + kAlignment - 1) / kAlignment * kAlignment;
  // Version 1.0 stores the header length in 2 bytes, 2.0 in 4.
  const bool v1 = total - v1_prefix <= kMaxV1HeaderLength;
  const size_t prefix = v1 ? v1_prefix : v1_prefix + 2;
  if (!v1 && header_length_ == 0) total += kAlignment;  // room for the longer prefix
  const size_t length = total - prefix;
  if (dict.size() + 1 > length) {
    return absl::InternalError(absl::StrCat("npy header of ", dict.size(), " bytes exceeds ",
                                            length));
  }
  std::string out(kMagic);
  out.push_back(static_cast<char>(v1 ? 1 : 2));
  out.push_back(0);
  for (size_t i = 0; i < prefix - kMagic.size() - 2; ++i) {
    out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  }
  out += dict;
  out.append(length - dict.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

absl::Status NpyRowWriter::Start(ElementType type, const std::vector<int64_t>& row_shape) {
  if (started_) return WithPath(Invalid("the array has started already"), path_);
  absl::StatusOr<std::string> descr = DescrOf(type);
  if (!descr.ok()) return WithPath(descr.status(), path_);
  absl::StatusOr<int64_t> count = NumElements(row_shape);
  if (!count.ok()) return WithPath(count.status(), path_);
  const int64_t element_size = ElementSizeInBytes(type);
  if (*count > std::numeric_limits<int64_t>::max() / element_size) {
    return WithPath(Invalid(absl::StrCat("row shape ", ShapeText(row_shape), " is too large")),
                    path_);
  }
  descr_ = *std::move(descr);
  row_shape_ = row_shape;
  row_bytes_ = static_cast<size_t>(*count * element_size);
  // Room for the widest row count.
  SHARDRT_ASSIGN_OR_RETURN(const std::string widest, Header(std::numeric_limits<int64_t>::max()));
  header_length_ = widest.size();
  SHARDRT_ASSIGN_OR_RETURN(const std::string header, Header(0));
  if (const int error = WriteAll(fd_, header.data(), header.size()); error != 0) {
    return IoError(path_, "write failed", error);
  }
  started_ = true;
  return absl::OkStatus();
}

absl::Status NpyRowWriter::AppendRow(const void* data, size_t size) {
  if (!started_ || finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": a row ", finished_ ? "after the end" : "before the start"));
  }
  if (size != row_bytes_) {
    return WithPath(Invalid(absl::StrCat("row ", rows_, " holds ", size, " bytes, expected ",
                                         row_bytes_, " (", ShapeText(row_shape_), ")")),
                    path_);
  }
  if (row_bytes_ > 0 && rows_ >= std::numeric_limits<int64_t>::max() / int64_t(row_bytes_)) {
    return WithPath(Invalid(absl::StrCat("more than ", rows_, " rows")), path_);
  }
  if (const int error = WriteAll(fd_, data, size); error != 0) {
    return IoError(path_, "write failed", error);
  }
  ++rows_;
  return absl::OkStatus();
}

absl::Status NpyRowWriter::Finish() {
  if (!started_ || finished_ || fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": finishing an array that ",
                     started_ ? "has finished already" : "has not started"));
  }
  SHARDRT_ASSIGN_OR_RETURN(const std::string header, Header(rows_));
  if (const int error = WriteAll(fd_, header.data(), header.size(), 0); error != 0) {
    return IoError(path_, "write failed", error);
  }
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return IoError(path_, "write failed", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return IoError(path_, absl::StrCat("cannot rename ", temp_path_, " to it"), errno);
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace shardrt::cli
