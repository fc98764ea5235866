#include "llama/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF files are little-endian; a big-endian host needs byte swapping");

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMinVersion = 2;  // version 1 had 32-bit counts and lengths
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxKeys = uint64_t{1} << 20;
constexpr uint32_t kMaxDims = 4;   // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;  // arrays of arrays, nested at most this deep
constexpr uint32_t kDefaultAlignment = 32;
constexpr int64_t kBlock = 32;  // elements per block of Q4_0, Q4_1 and Q8_0
// Smallest encodings, to bound counts by the bytes left: a key/value (empty key, type, one
// byte) and a tensor info (empty name, n_dims, one dim, type, offset).
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// GGUF metadata value types.
enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
constexpr uint32_t kNumValueTypes = 13;

std::string ValueTypeName(uint32_t type) {
  static constexpr const char* kNames[kNumValueTypes] = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  if (type < kNumValueTypes) return kNames[type];
  return absl::StrCat("value type ", type);
}

// Bytes of a fixed-size value type; 0 for string and array (and unknown types).
size_t ScalarBytes(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool: return 1;
    case kU16:
    case kI16: return 2;
    case kU32:
    case kI32:
    case kF32: return 4;
    case kU64:
    case kI64:
    case kF64: return 8;
    default: return 0;
  }
}

bool IsInteger(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kU16:
    case kI16:
    case kU32:
    case kI32:
    case kU64:
    case kI64: return true;
    default: return false;
  }
}

// Storage of one tensor type: `block_elements` values in `block_bytes` bytes.
struct TypeLayout {
  int64_t block_elements = 0;  // 0: a type this reader does not support
  int64_t block_bytes = 0;
};

TypeLayout LayoutOf(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kF32: return {1, 4};
    case GgufType::kF16: return {1, 2};
    case GgufType::kBF16: return {1, 2};
    case GgufType::kQ4_0: return {kBlock, 2 + kBlock / 2};
    case GgufType::kQ4_1: return {kBlock, 2 + 2 + kBlock / 2};
    case GgufType::kQ8_0: return {kBlock, 2 + kBlock};
  }
  return {};
}

// "GGUF file PATH: " followed by the pieces: the prefix of every error of a file.
template <typename... Pieces>
absl::Status Invalid(absl::string_view path, const Pieces&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file ", path, ": ", pieces...));
}

// The error for open(2), stat(2) or mmap(2) failing with `error`.
absl::Status IoError(const std::string& path, absl::string_view what, int error) {
  const std::string message =
      absl::StrCat("GGUF file ", path, ": ", what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR: return absl::NotFoundError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    default: return absl::UnavailableError(message);
  }
}

// A bounds-checked cursor over the file's bytes. Each read first checks that the bytes are
// there, and otherwise returns an error naming `what` was being read, the offset, and how many
// bytes were needed and left.
class Cursor {
 public:
  Cursor(absl::string_view path, const std::byte* data, size_t size, size_t pos = 0)
      : path_(path), data_(data), size_(size), pos_(pos) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  absl::Status Need(uint64_t bytes, absl::string_view what) const {
    if (bytes <= remaining()) return absl::OkStatus();
    return Invalid(path_, "truncated at ", what, ": expected ", bytes, " bytes at offset ", pos_,
                   ", the file has ", remaining(), " left");
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    SHARDRT_RETURN_IF_ERROR(Need(sizeof(T), what));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  absl::Status Skip(uint64_t bytes, absl::string_view what) {
    SHARDRT_RETURN_IF_ERROR(Need(bytes, what));
    pos_ += bytes;
    return absl::OkStatus();
  }

  // A GGUF string: a uint64 length, then that many bytes.
  absl::StatusOr<absl::string_view> String(absl::string_view what) {
    SHARDRT_ASSIGN_OR_RETURN(const uint64_t length, Read<uint64_t>(what));
    SHARDRT_RETURN_IF_ERROR(Need(length, what));
    const absl::string_view text(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return text;
  }

 private:
  absl::string_view path_;
  const std::byte* data_;
  size_t size_;
  size_t pos_;
};

// Walks over one value of GGUF value type `type` (its type tag already read), checking that
// every length and count lies within the file. `depth` counts the arrays around it.
absl::Status SkipValue(Cursor& cursor, absl::string_view path, uint32_t type, int depth,
                       absl::string_view what) {
  if (const size_t bytes = ScalarBytes(type); bytes != 0) return cursor.Skip(bytes, what);
  if (type == kString) return cursor.String(what).status();
  if (type != kArray) {
    return Invalid(path, what, ": unknown value type ", type, " (expected 0 to ",
                   kNumValueTypes - 1, ")");
  }
  if (depth >= kMaxArrayDepth) {
    return Invalid(path, what, ": arrays nested more than ", kMaxArrayDepth, " deep");
  }
  SHARDRT_ASSIGN_OR_RETURN(const uint32_t element_type, cursor.Read<uint32_t>(what));
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t count, cursor.Read<uint64_t>(what));
  if (element_type >= kNumValueTypes) {
    return Invalid(path, what, ": unknown array element type ", element_type, " (expected 0 to ",
                   kNumValueTypes - 1, ")");
  }
  // Every element takes at least this many bytes (a string its length, an array its type and
  // count), so the count is bounded by the bytes left before anything is walked.
  const size_t min_bytes = element_type == kString  ? 8
                           : element_type == kArray ? 12
                                                    : ScalarBytes(element_type);
  if (count > cursor.remaining() / min_bytes) {
    return Invalid(path, what, ": array of ", count, " ", ValueTypeName(element_type),
                   " elements needs at least ", min_bytes, " bytes each at offset ", cursor.pos(),
                   ", the file has ", cursor.remaining(), " left");
  }
  if (element_type != kString && element_type != kArray) {
    return cursor.Skip(count * min_bytes, what);
  }
  for (uint64_t i = 0; i < count; ++i) {
    SHARDRT_RETURN_IF_ERROR(SkipValue(cursor, path, element_type, depth + 1, what));
  }
  return absl::OkStatus();
}

// Reads an integer of GGUF value type `type` at `p` as int64 (uint64 values above INT64_MAX
// come back as false).
bool LoadInteger(const std::byte* p, uint32_t type, int64_t* value) {
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (type) {
    case kU8: *value = load(uint8_t{}); return true;
    case kI8: *value = load(int8_t{}); return true;
    case kU16: *value = load(uint16_t{}); return true;
    case kI16: *value = load(int16_t{}); return true;
    case kU32: *value = load(uint32_t{}); return true;
    case kI32: *value = load(int32_t{}); return true;
    case kI64: *value = load(int64_t{}); return true;
    case kU64: {
      const uint64_t v = load(uint64_t{});
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *value = static_cast<int64_t>(v);
      return true;
    }
    default: return false;
  }
}

// "[576, 49152]"
std::string DimsText(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// Bytes of a tensor of `type` and `dims` (already checked: 1 to 4 dims, each >= 1, element
// count within int64, dims[0] a multiple of the block size), or -1 if it exceeds int64.
int64_t TensorBytes(const TypeLayout& layout, int64_t elements) {
  int64_t bytes;
  if (__builtin_mul_overflow(elements / layout.block_elements, layout.block_bytes, &bytes)) {
    return -1;
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Dequantization, bit-identical to the gguf Python package (gguf/quants.py): every value is
// computed in f32 from the f16 scales converted exactly, as NumPy does: d * q (Q8_0, Q4_0) and
// (d * q) + m (Q4_1). The product of a scale (an f16 value: 11 significant bits, magnitude
// 2^-24 to 65504) and a quant (an integer of at most 8 bits) is always exact in f32, neither
// rounded, nor subnormal, nor overflowing; so Q8_0 and Q4_0 values round never, and Q4_1 values
// once, in the sum, whether or not the compiler fuses it into an FMA.

// An IEEE half (binary16) to f32, exactly: subnormals are normalized, infinities kept, and a
// NaN keeps its sign and payload, quiet bit included (as NumPy's float16 -> float32 cast).
inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // mantissa * 2^-24: shift the leading one up to bit 10, the implicit bit of a normal value.
    const int shift = std::countl_zero(mantissa) - 21;
    mantissa <<= shift;
    bits = sign | (static_cast<uint32_t>(127 - 15 + 1 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t Load16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Blocks [block_begin, block_end) of one row, each `out` receives 32 values.
void DequantizeQ8_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kBlock) {
    const std::byte* block = row + b * 34;
    const float d = HalfToFloat(Load16(block));
    const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
    for (int k = 0; k < kBlock; ++k) out[k] = static_cast<float>(q[k]) * d;
  }
}

void DequantizeQ4_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kBlock) {
    const std::byte* block = row + b * 18;
    const float d = HalfToFloat(Load16(block));
    const uint8_t* q = reinterpret_cast<const uint8_t*>(block + 2);
    for (int k = 0; k < kBlock / 2; ++k) {
      out[k] = d * static_cast<float>((q[k] & 0x0f) - 8);
      out[k + kBlock / 2] = d * static_cast<float>((q[k] >> 4) - 8);
    }
  }
}

// Whether or not the compiler fuses d * q + m into one FMA (GCC does by default where the
// target has one) makes no difference: d * q is exact in f32, so only the sum rounds.
void DequantizeQ4_1(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kBlock) {
    const std::byte* block = row + b * 20;
    const float d = HalfToFloat(Load16(block));
    const float m = HalfToFloat(Load16(block + 2));
    const uint8_t* q = reinterpret_cast<const uint8_t*>(block + 4);
    for (int k = 0; k < kBlock / 2; ++k) {
      out[k] = d * static_cast<float>(q[k] & 0x0f) + m;
      out[k + kBlock / 2] = d * static_cast<float>(q[k] >> 4) + m;
    }
  }
}

}  // namespace

std::string GgufTypeName(uint32_t type) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {0, "F32"},     {1, "F16"},      {2, "Q4_0"},   {3, "Q4_1"},    {6, "Q5_0"},
      {7, "Q5_1"},    {8, "Q8_0"},     {9, "Q8_1"},   {10, "Q2_K"},   {11, "Q3_K"},
      {12, "Q4_K"},   {13, "Q5_K"},    {14, "Q6_K"},  {15, "Q8_K"},   {16, "IQ2_XXS"},
      {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
      {22, "IQ2_S"},  {23, "IQ4_XS"},  {24, "I8"},    {25, "I16"},    {26, "I32"},
      {27, "I64"},    {28, "F64"},     {29, "IQ1_M"}, {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},  {39, "MXFP4"},
  };
  for (const auto& [value, name] : kNames) {
    if (value == type) return name;
  }
  return absl::StrCat("type ", type);
}

int64_t GgufTensor::num_elements() const {
  int64_t count = 1;
  for (const int64_t dim : dims) count *= dim;
  return count;
}

int64_t GgufTensor::num_rows() const {
  int64_t count = 1;
  for (size_t i = 1; i < dims.size(); ++i) count *= dims[i];
  return count;
}

GgufFile::~GgufFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  // As cli::ReadRegularFile: stat before opening (a FIFO or device is never opened), open
  // non-blocking, and check the opened file again.
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return IoError(path, "cannot open", errno);
  if (!S_ISREG(info.st_mode)) {
    return Invalid(path, "expected a regular file, got ",
                   S_ISDIR(info.st_mode) ? "a directory" : "a special file");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return IoError(path, "cannot open", errno);
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (::fstat(fd, &info) != 0) return IoError(path, "cannot stat", errno);
  if (!S_ISREG(info.st_mode)) return Invalid(path, "expected a regular file");
  if (info.st_size < 0 || info.st_size > limits::kMaxFileBytes) {
    return Invalid(path, "file of ", info.st_size, " bytes exceeds limits::kMaxFileBytes (",
                   limits::kMaxFileBytes, ")");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(info.st_size);
  if (file->size_ > 0) {
    void* mapping = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) return IoError(path, "cannot map", errno);
    file->data_ = static_cast<const std::byte*>(mapping);
  }
  SHARDRT_RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::Status GgufFile::Parse() {
  const absl::string_view path = path_;
  Cursor cursor(path, data_, size_);

  // Header: magic, version, tensor count, key/value count.
  SHARDRT_RETURN_IF_ERROR(cursor.Need(4, "the magic"));
  if (std::memcmp(data_, kMagic, 4) != 0) {
    return Invalid(path, "bad magic: expected 'GGUF', got '",
                   absl::CHexEscape(absl::string_view(reinterpret_cast<const char*>(data_), 4)),
                   "'");
  }
  SHARDRT_RETURN_IF_ERROR(cursor.Skip(4, "the magic"));
  SHARDRT_ASSIGN_OR_RETURN(version_, cursor.Read<uint32_t>("the version"));
  if (version_ < kMinVersion || version_ > kMaxVersion) {
    return Invalid(path, "unsupported version: expected ", kMinVersion, " or ", kMaxVersion,
                   ", got ", version_);
  }
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t tensor_count, cursor.Read<uint64_t>("tensor_count"));
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t kv_count, cursor.Read<uint64_t>("kv_count"));
  if (tensor_count > kMaxTensors || tensor_count > cursor.remaining() / kMinTensorInfoBytes) {
    return Invalid(path, "tensor_count: expected at most ", kMaxTensors,
                   " and at most the file's remaining ", cursor.remaining(), " bytes / ",
                   kMinTensorInfoBytes, ", got ", tensor_count);
  }
  if (kv_count > kMaxKeys || kv_count > cursor.remaining() / kMinKeyValueBytes) {
    return Invalid(path, "kv_count: expected at most ", kMaxKeys,
                   " and at most the file's remaining ", cursor.remaining(), " bytes / ",
                   kMinKeyValueBytes, ", got ", kv_count);
  }

  // Metadata: key, value type, value.
  metadata_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key_what = absl::StrCat("metadata key #", i);
    SHARDRT_ASSIGN_OR_RETURN(const absl::string_view key, cursor.String(key_what));
    const std::string what = absl::StrCat("metadata key '", absl::CHexEscape(key), "'");
    Value value;
    value.key = std::string(key);
    SHARDRT_ASSIGN_OR_RETURN(value.type, cursor.Read<uint32_t>(what));
    if (value.type >= kNumValueTypes) {
      return Invalid(path, what, ": unknown value type ", value.type, " (expected 0 to ",
                     kNumValueTypes - 1, ")");
    }
    if (value.type == kArray) {
      // Read the array header here too, so that the getters find the elements at `offset`.
      Cursor peek(path, data_, size_, cursor.pos());
      SHARDRT_ASSIGN_OR_RETURN(value.element_type, peek.Read<uint32_t>(what));
      SHARDRT_ASSIGN_OR_RETURN(value.count, peek.Read<uint64_t>(what));
      value.offset = peek.pos();
    } else {
      value.offset = cursor.pos();
    }
    SHARDRT_RETURN_IF_ERROR(SkipValue(cursor, path, value.type, 0, what));
    metadata_.push_back(std::move(value));
  }
  metadata_by_key_.resize(metadata_.size());
  for (size_t i = 0; i < metadata_.size(); ++i) metadata_by_key_[i] = static_cast<uint32_t>(i);
  std::stable_sort(metadata_by_key_.begin(), metadata_by_key_.end(),
                   [this](uint32_t a, uint32_t b) { return metadata_[a].key < metadata_[b].key; });
  for (size_t i = 1; i < metadata_by_key_.size(); ++i) {
    const Value& a = metadata_[metadata_by_key_[i - 1]];
    const Value& b = metadata_[metadata_by_key_[i]];
    if (a.key == b.key) {
      return Invalid(path, "duplicate metadata key '", absl::CHexEscape(a.key), "' (keys #",
                     metadata_by_key_[i - 1], " and #", metadata_by_key_[i], ")");
    }
  }

  uint64_t alignment = kDefaultAlignment;
  if (const Value* value = FindValue("general.alignment"); value != nullptr) {
    if (value->type != kU32) {
      return Invalid(path, "general.alignment: expected type uint32, got ",
                     ValueTypeName(value->type));
    }
    uint32_t v;
    std::memcpy(&v, data_ + value->offset, 4);
    if (v == 0 || !std::has_single_bit(v)) {
      return Invalid(path, "general.alignment: expected a nonzero power of two, got ", v);
    }
    alignment = v;
  }

  // Tensor infos: name, n_dims, dims, type, offset (from the start of the data section).
  tensors_.reserve(tensor_count);
  std::vector<uint64_t> relative_offsets;
  relative_offsets.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(const absl::string_view name,
                             cursor.String(absl::StrCat("the name of tensor #", i)));
    const std::string what = absl::StrCat("tensor '", absl::CHexEscape(name), "'");
    GgufTensor tensor;
    tensor.name = std::string(name);
    SHARDRT_ASSIGN_OR_RETURN(const uint32_t n_dims, cursor.Read<uint32_t>(what));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return Invalid(path, what, ": n_dims: expected 1 to ", kMaxDims, ", got ", n_dims);
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      SHARDRT_ASSIGN_OR_RETURN(const uint64_t dim, cursor.Read<uint64_t>(what));
      if (dim < 1 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(path, what, ": dims[", d, "]: expected 1 to INT64_MAX, got ", dim);
      }
      tensor.dims.push_back(static_cast<int64_t>(dim));
      if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
        return Invalid(path, what, ": element count of dims ", DimsText(tensor.dims),
                       "... overflows int64");
      }
    }
    SHARDRT_ASSIGN_OR_RETURN(const uint32_t type, cursor.Read<uint32_t>(what));
    const TypeLayout layout = LayoutOf(type);
    if (layout.block_elements == 0) {
      const std::string type_name = GgufTypeName(type);
      return Invalid(path, what, ": ",
                     type_name.starts_with("type ")
                         ? absl::StrCat("unknown type ", type)
                         : absl::StrCat("type ", type_name, " (", type, ")"),
                     " is not supported: expected F32, F16, BF16, Q4_0, Q4_1 or Q8_0");
    }
    tensor.type = static_cast<GgufType>(type);
    if (tensor.dims[0] % layout.block_elements != 0) {
      return Invalid(path, what, ": dims[0] of a ", GgufTypeName(type),
                     " tensor: expected a multiple of ", layout.block_elements, ", got ",
                     tensor.dims[0]);
    }
    SHARDRT_ASSIGN_OR_RETURN(const uint64_t offset, cursor.Read<uint64_t>(what));
    if (offset % alignment != 0) {
      return Invalid(path, what, ": offset: expected a multiple of the alignment ", alignment,
                     ", got ", offset);
    }
    const int64_t bytes = TensorBytes(layout, elements);
    if (bytes < 0 || static_cast<uint64_t>(bytes) > size_) {
      return Invalid(path, what, ": data of ", GgufTypeName(type), " dims ", DimsText(tensor.dims),
                     " is larger than the file (", size_, " bytes)");
    }
    tensor.bytes = static_cast<uint64_t>(bytes);
    relative_offsets.push_back(offset);
    tensors_.push_back(std::move(tensor));
  }

  // The data section starts at the first aligned offset after the tensor infos.
  const uint64_t data_start = (cursor.pos() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& tensor = tensors_[i];
    const uint64_t offset = relative_offsets[i];
    if (offset > size_ || data_start > size_ - offset ||
        tensor.bytes > size_ - data_start - offset) {
      return Invalid(path, "tensor '", absl::CHexEscape(tensor.name), "': data at offset ", offset,
                     " of the data section (file offset ", data_start, " + ", offset, "), ",
                     tensor.bytes, " bytes, extends beyond the end of the file (", size_,
                     " bytes)");
    }
    tensor.offset = data_start + offset;
  }

  std::vector<uint32_t> by_offset(tensors_.size());
  tensors_by_name_.resize(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    by_offset[i] = tensors_by_name_[i] = static_cast<uint32_t>(i);
  }
  std::stable_sort(tensors_by_name_.begin(), tensors_by_name_.end(),
                   [this](uint32_t a, uint32_t b) { return tensors_[a].name < tensors_[b].name; });
  for (size_t i = 1; i < tensors_by_name_.size(); ++i) {
    const GgufTensor& a = tensors_[tensors_by_name_[i - 1]];
    const GgufTensor& b = tensors_[tensors_by_name_[i]];
    if (a.name == b.name) {
      return Invalid(path, "duplicate tensor name '", absl::CHexEscape(a.name), "' (tensors #",
                     tensors_by_name_[i - 1], " and #", tensors_by_name_[i], ")");
    }
  }
  std::sort(by_offset.begin(), by_offset.end(), [this](uint32_t a, uint32_t b) {
    return tensors_[a].offset < tensors_[b].offset ||
           (tensors_[a].offset == tensors_[b].offset && a < b);
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& a = tensors_[by_offset[i - 1]];
    const GgufTensor& b = tensors_[by_offset[i]];
    if (a.offset + a.bytes > b.offset) {
      return Invalid(path, "tensors '", absl::CHexEscape(a.name), "' (file bytes [", a.offset, ", ",
                     a.offset + a.bytes, ")) and '", absl::CHexEscape(b.name), "' (file bytes [",
                     b.offset, ", ", b.offset + b.bytes, ")) overlap");
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Metadata

const GgufFile::Value* GgufFile::FindValue(absl::string_view key) const {
  const auto it = std::lower_bound(
      metadata_by_key_.begin(), metadata_by_key_.end(), key,
      [this](uint32_t index, absl::string_view k) { return metadata_[index].key < k; });
  if (it == metadata_by_key_.end() || metadata_[*it].key != key) return nullptr;
  return &metadata_[*it];
}

bool GgufFile::HasKey(absl::string_view key) const { return FindValue(key) != nullptr; }

std::vector<std::string> GgufFile::MetadataKeys() const {
  std::vector<std::string> keys;
  keys.reserve(metadata_.size());
  for (const Value& value : metadata_) keys.push_back(value.key);
  return keys;
}

absl::StatusOr<const GgufFile::Value*> GgufFile::FindTyped(
    absl::string_view key, absl::string_view expected,
    bool (*accept)(uint32_t type, uint32_t element_type)) const {
  const Value* value = FindValue(key);
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat("GGUF file ", path_, ": metadata key '",
                                            absl::CHexEscape(key), "' not found"));
  }
  if (!accept(value->type, value->element_type)) {
    return Invalid(
        path_, "metadata key '", absl::CHexEscape(key), "': expected ", expected, ", got ",
        value->type == kArray ? absl::StrCat("an array of ", ValueTypeName(value->element_type))
                              : ValueTypeName(value->type));
  }
  return value;
}

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(
      const Value* value,
      FindTyped(key, "a string", [](uint32_t type, uint32_t) { return type == kString; }));
  Cursor cursor(path_, data_, size_, value->offset);
  SHARDRT_ASSIGN_OR_RETURN(const absl::string_view text, cursor.String("a metadata string"));
  return std::string(text);
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(
      const Value* value,
      FindTyped(key, "an integer", [](uint32_t type, uint32_t) { return IsInteger(type); }));
  int64_t result;
  if (!LoadInteger(data_ + value->offset, value->type, &result)) {
    uint64_t v;
    std::memcpy(&v, data_ + value->offset, 8);
    return Invalid(path_, "metadata key '", absl::CHexEscape(key), "': uint64 value ", v,
                   " exceeds INT64_MAX");
  }
  return result;
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(const Value* value,
                           FindTyped(key, "float32 or float64", [](uint32_t type, uint32_t) {
                             return type == kF32 || type == kF64;
                           }));
  if (value->type == kF32) {
    float v;
    std::memcpy(&v, data_ + value->offset, 4);
    return v;
  }
  double v;
  std::memcpy(&v, data_ + value->offset, 8);
  return v;
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(
      const Value* value,
      FindTyped(key, "a bool", [](uint32_t type, uint32_t) { return type == kBool; }));
  return std::to_integer<uint8_t>(data_[value->offset]) != 0;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(const Value* value,
                           FindTyped(key, "an array of string", [](uint32_t type, uint32_t e) {
                             return type == kArray && e == kString;
                           }));
  std::vector<std::string> strings;
  strings.reserve(value->count);  // Parse bounded it by the file's size / 8
  Cursor cursor(path_, data_, size_, value->offset);
  for (uint64_t i = 0; i < value->count; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(const absl::string_view text, cursor.String("a metadata string"));
    strings.emplace_back(text);
  }
  return strings;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(const Value* value,
                           FindTyped(key, "an array of integers", [](uint32_t type, uint32_t e) {
                             return type == kArray && IsInteger(e);
                           }));
  const size_t stride = ScalarBytes(value->element_type);
  std::vector<int64_t> result(value->count);  // Parse bounded it by the file's size / stride
  for (uint64_t i = 0; i < value->count; ++i) {
    if (!LoadInteger(data_ + value->offset + i * stride, value->element_type, &result[i])) {
      return Invalid(path_, "metadata key '", absl::CHexEscape(key), "': element ", i,
                     " exceeds INT64_MAX");
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Tensors

void GgufFile::ReleasePages() const {
  if (data_ != nullptr) {
    ::madvise(const_cast<std::byte*>(data_), size_, MADV_DONTNEED);
  }
}

const GgufTensor* GgufFile::Find(absl::string_view name) const {
  const auto it = std::lower_bound(
      tensors_by_name_.begin(), tensors_by_name_.end(), name,
      [this](uint32_t index, absl::string_view n) { return tensors_[index].name < n; });
  if (it == tensors_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

absl::Status GgufFile::Dequantize(const GgufTensor& tensor, int64_t row_begin, int64_t row_end,
                                  int64_t col_begin, int64_t col_end, absl::Span<float> out) const {
  const std::string what =
      absl::StrCat("Dequantize of tensor '", absl::CHexEscape(tensor.name), "'");
  // The tensor may be a caller's copy: check it describes data inside this file.
  const TypeLayout layout = LayoutOf(static_cast<uint32_t>(tensor.type));
  bool valid = layout.block_elements != 0 && !tensor.dims.empty() && tensor.dims.size() <= kMaxDims;
  int64_t elements = 1;
  for (const int64_t dim : tensor.dims) {
    valid = valid && dim >= 1 && !__builtin_mul_overflow(elements, dim, &elements);
  }
  valid = valid && tensor.dims[0] % layout.block_elements == 0 &&
          TensorBytes(layout, elements) == static_cast<int64_t>(tensor.bytes) &&
          tensor.offset <= size_ && tensor.bytes <= size_ - tensor.offset;
  if (!valid) {
    return Invalid(path_, what, ": not a tensor of this file (",
                   GgufTypeName(static_cast<uint32_t>(tensor.type)), " dims ",
                   DimsText(tensor.dims), ", ", tensor.bytes, " bytes at offset ", tensor.offset,
                   ")");
  }
  const int64_t rows = tensor.num_rows();
  const int64_t cols = tensor.row_length();
  if (row_begin < 0 || row_begin > row_end || row_end > rows) {
    return Invalid(path_, what, ": rows [", row_begin, ", ", row_end,
                   "): expected a range within [0, ", rows, ")");
  }
  if (col_begin < 0 || col_begin > col_end || col_end > cols) {
    return Invalid(path_, what, ": columns [", col_begin, ", ", col_end,
                   "): expected a range within [0, ", cols, ")");
  }
  if (col_begin % layout.block_elements != 0 || col_end % layout.block_elements != 0) {
    return Invalid(path_, what, ": columns [", col_begin, ", ", col_end, ") of a ",
                   GgufTypeName(static_cast<uint32_t>(tensor.type)),
                   " tensor: expected multiples of the block size ", layout.block_elements);
  }
  const int64_t width = col_end - col_begin;
  const int64_t count = (row_end - row_begin) * width;  // at most the element count
  if (static_cast<int64_t>(out.size()) != count) {
    return Invalid(path_, what, ": output of ", out.size(), " floats, expected ", count, " (",
                   row_end - row_begin, " rows x ", width, " columns)");
  }
  if (count == 0) return absl::OkStatus();  // (`out` may then hold no pointer at all)
  const int64_t row_bytes = cols / layout.block_elements * layout.block_bytes;
  const int64_t block_begin = col_begin / layout.block_elements;
  const int64_t block_end = col_end / layout.block_elements;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* row = data_ + tensor.offset + r * row_bytes;
    float* dst = out.data() + (r - row_begin) * width;
    switch (tensor.type) {
      case GgufType::kF32: std::memcpy(dst, row + col_begin * 4, width * 4); break;
      case GgufType::kF16:
        for (int64_t c = 0; c < width; ++c) dst[c] = HalfToFloat(Load16(row + (col_begin + c) * 2));
        break;
      case GgufType::kBF16:
        for (int64_t c = 0; c < width; ++c) {
          dst[c] = std::bit_cast<float>(uint32_t{Load16(row + (col_begin + c) * 2)} << 16);
        }
        break;
      case GgufType::kQ4_0: DequantizeQ4_0(row, block_begin, block_end, dst); break;
      case GgufType::kQ4_1: DequantizeQ4_1(row, block_begin, block_end, dst); break;
      case GgufType::kQ8_0: DequantizeQ8_0(row, block_begin, block_end, dst); break;
    }
  }
  return absl::OkStatus();
}

}  // namespace shardrt::llama
