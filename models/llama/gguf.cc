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
#include "llama/quants.h"
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
constexpr int kMaxArrayDepth = 8;  // arrays of arrays, nested at most this deep
constexpr uint32_t kDefaultAlignment = 32;
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

// "GGUF file PATH: " followed by the pieces: the prefix of every error of a file.
template <typename... Pieces>
absl::Status Invalid(absl::string_view path, const Pieces&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file ", path, ": ", pieces...));
}

// The indices of `items` in the order of key_of(item) (stable), for lookups by key. Error:
// InvalidArgument naming the first key two items share, e.g. "duplicate tensor name 'x'
// (tensors #1 and #4)".
template <typename T, typename KeyOf>
absl::StatusOr<std::vector<uint32_t>> IndexByKey(absl::string_view path,
                                                 const std::vector<T>& items, KeyOf key_of,
                                                 absl::string_view key_name,
                                                 absl::string_view items_name) {
  std::vector<uint32_t> order(items.size());
  for (size_t i = 0; i < items.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return key_of(items[a]) < key_of(items[b]);
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const std::string& key = key_of(items[order[i - 1]]);
    if (key == key_of(items[order[i]])) {
      return Invalid(path, "duplicate ", key_name, " '", absl::CHexEscape(key), "' (",
                     items_name, " #", order[i - 1], " and #", order[i], ")");
    }
  }
  return order;
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

}  // namespace

// A bounds-checked cursor over the file's bytes. Each read first checks that the bytes are
// there, and otherwise returns an error naming `what` was being read, the offset, and how many
// bytes were needed and left.
class GgufFile::Cursor {
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

  // Walks over one value of GGUF value type `type` (its type tag already read), checking that
  // every length and count lies within the file. `depth` counts the arrays around it.
  absl::Status SkipValue(uint32_t type, int depth, absl::string_view what);

  // A tensor info's n_dims and dims (GGUF order) into `dims`, for the tensor `what`; returns
  // the element count. Errors: n_dims not 1 to kGgufMaxDims, a dim not 1 to INT64_MAX, an
  // element count beyond int64.
  absl::StatusOr<int64_t> Dims(absl::string_view what, std::vector<int64_t>& dims);

 private:
  absl::string_view path_;
  const std::byte* data_;
  size_t size_;
  size_t pos_;
};

absl::Status GgufFile::Cursor::SkipValue(uint32_t type, int depth, absl::string_view what) {
  if (const size_t bytes = ScalarBytes(type); bytes != 0) return Skip(bytes, what);
  if (type == kString) return String(what).status();
  if (type != kArray) {
    return Invalid(path_, what, ": unknown value type ", type, " (expected 0 to ",
                   kNumValueTypes - 1, ")");
  }
  if (depth >= kMaxArrayDepth) {
    return Invalid(path_, what, ": arrays nested more than ", kMaxArrayDepth, " deep");
  }
  SHARDRT_ASSIGN_OR_RETURN(const uint32_t element_type, Read<uint32_t>(what));
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t count, Read<uint64_t>(what));
  if (element_type >= kNumValueTypes) {
    return Invalid(path_, what, ": unknown array element type ", element_type,
                   " (expected 0 to ", kNumValueTypes - 1, ")");
  }
  // Every element takes at least this many bytes (a string its length, an array its type and
  // count), so the count is bounded by the bytes left before anything is walked.
  const size_t min_bytes = element_type == kString  ? 8
                           : element_type == kArray ? 12
                                                    : ScalarBytes(element_type);
  if (count > remaining() / min_bytes) {
    return Invalid(path_, what, ": array of ", count, " ", ValueTypeName(element_type),
                   " elements needs at least ", min_bytes, " bytes each at offset ", pos_,
                   ", the file has ", remaining(), " left");
  }
  if (element_type != kString && element_type != kArray) {
    return Skip(count * min_bytes, what);
  }
  for (uint64_t i = 0; i < count; ++i) {
    SHARDRT_RETURN_IF_ERROR(SkipValue(element_type, depth + 1, what));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GgufFile::Cursor::Dims(absl::string_view what,
                                               std::vector<int64_t>& dims) {
  SHARDRT_ASSIGN_OR_RETURN(const uint32_t n_dims, Read<uint32_t>(what));
  if (n_dims < 1 || n_dims > kGgufMaxDims) {
    return Invalid(path_, what, ": n_dims: expected 1 to ", kGgufMaxDims, ", got ", n_dims);
  }
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    SHARDRT_ASSIGN_OR_RETURN(const uint64_t dim, Read<uint64_t>(what));
    if (dim < 1 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Invalid(path_, what, ": dims[", d, "]: expected 1 to INT64_MAX, got ", dim);
    }
    dims.push_back(static_cast<int64_t>(dim));
    if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
      return Invalid(path_, what, ": element count of dims ", DimsText(dims),
                     "... overflows int64");
    }
  }
  return elements;
}


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
  Cursor cursor(path_, data_, size_);
  SHARDRT_ASSIGN_OR_RETURN(const Counts counts, ReadHeader(cursor));
  SHARDRT_RETURN_IF_ERROR(ReadMetadata(cursor, counts.keys));
  SHARDRT_ASSIGN_OR_RETURN(const uint64_t alignment, Alignment());
  SHARDRT_ASSIGN_OR_RETURN(const std::vector<uint64_t> relative_offsets,
                           ReadTensorInfos(cursor, counts.tensors, alignment));
  SHARDRT_RETURN_IF_ERROR(PlaceTensors(cursor, alignment, relative_offsets));
  SHARDRT_RETURN_IF_ERROR(IndexTensors());
  return CheckNoOverlap();
}

// Header: magic, version, tensor count, key/value count.
absl::StatusOr<GgufFile::Counts> GgufFile::ReadHeader(Cursor& cursor) {
  const absl::string_view path = path_;
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
  Counts counts;
  SHARDRT_ASSIGN_OR_RETURN(counts.tensors, cursor.Read<uint64_t>("tensor_count"));
  SHARDRT_ASSIGN_OR_RETURN(counts.keys, cursor.Read<uint64_t>("kv_count"));
  if (counts.tensors > kMaxTensors ||
      counts.tensors > cursor.remaining() / kMinTensorInfoBytes) {
    return Invalid(path, "tensor_count: expected at most ", kMaxTensors,
                   " and at most the file's remaining ", cursor.remaining(), " bytes / ",
                   kMinTensorInfoBytes, ", got ", counts.tensors);
  }
  if (counts.keys > kMaxKeys || counts.keys > cursor.remaining() / kMinKeyValueBytes) {
    return Invalid(path, "kv_count: expected at most ", kMaxKeys,
                   " and at most the file's remaining ", cursor.remaining(), " bytes / ",
                   kMinKeyValueBytes, ", got ", counts.keys);
  }
  return counts;
}

absl::Status GgufFile::ReadMetadata(Cursor& cursor, uint64_t count) {
  metadata_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(Value value, ReadKeyValue(cursor, i));
    metadata_.push_back(std::move(value));
  }
  SHARDRT_ASSIGN_OR_RETURN(
      metadata_by_key_,
      IndexByKey(path_, metadata_, [](const Value& v) -> const std::string& { return v.key; },
                 "metadata key", "keys"));
  return absl::OkStatus();
}

// Metadata: key, value type, value.
absl::StatusOr<GgufFile::Value> GgufFile::ReadKeyValue(Cursor& cursor, uint64_t index) {
  const absl::string_view path = path_;
  SHARDRT_ASSIGN_OR_RETURN(const absl::string_view key,
                           cursor.String(absl::StrCat("metadata key #", index)));
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
  SHARDRT_RETURN_IF_ERROR(cursor.SkipValue(value.type, 0, what));
  return value;
}

absl::StatusOr<uint64_t> GgufFile::Alignment() const {
  const Value* value = FindValue("general.alignment");
  if (value == nullptr) return kDefaultAlignment;
  if (value->type != kU32) {
    return Invalid(path_, "general.alignment: expected type uint32, got ",
                   ValueTypeName(value->type));
  }
  uint32_t v;
  std::memcpy(&v, data_ + value->offset, 4);
  if (v == 0 || !std::has_single_bit(v)) {
    return Invalid(path_, "general.alignment: expected a nonzero power of two, got ", v);
  }
  return v;
}

absl::StatusOr<std::vector<uint64_t>> GgufFile::ReadTensorInfos(Cursor& cursor, uint64_t count,
                                                                uint64_t alignment) {
  tensors_.reserve(count);
  std::vector<uint64_t> relative_offsets;
  relative_offsets.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t offset = 0;
    SHARDRT_ASSIGN_OR_RETURN(GgufTensor tensor, ReadTensorInfo(cursor, i, alignment, &offset));
    relative_offsets.push_back(offset);
    tensors_.push_back(std::move(tensor));
  }
  return relative_offsets;
}

// Tensor info: name, n_dims, dims, type, offset (from the start of the data section).
absl::StatusOr<GgufTensor> GgufFile::ReadTensorInfo(Cursor& cursor, uint64_t index,
                                                    uint64_t alignment, uint64_t* offset) {
  const absl::string_view path = path_;
  SHARDRT_ASSIGN_OR_RETURN(const absl::string_view name,
                           cursor.String(absl::StrCat("the name of tensor #", index)));
  const std::string what = absl::StrCat("tensor '", absl::CHexEscape(name), "'");
  GgufTensor tensor;
  tensor.name = std::string(name);
  SHARDRT_ASSIGN_OR_RETURN(const int64_t elements, cursor.Dims(what, tensor.dims));
  SHARDRT_ASSIGN_OR_RETURN(const uint32_t type, cursor.Read<uint32_t>(what));
  const BlockLayout layout = LayoutOf(static_cast<GgufType>(type));
  if (layout.block_elements == 0) {
    const std::string type_name = GgufTypeName(type);
    return Invalid(path, what, ": ",
                   type_name.starts_with("type ")
                       ? absl::StrCat("unknown type ", type)
                       : absl::StrCat("type ", type_name, " (", type, ")"),
                   " is not supported: expected F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K or Q6_K");
  }
  tensor.type = static_cast<GgufType>(type);
  if (tensor.dims[0] % layout.block_elements != 0) {
    return Invalid(path, what, ": dims[0] of a ", GgufTypeName(type),
                   " tensor: expected a multiple of ", layout.block_elements, ", got ",
                   tensor.dims[0]);
  }
  SHARDRT_ASSIGN_OR_RETURN(*offset, cursor.Read<uint64_t>(what));
  if (*offset % alignment != 0) {
    return Invalid(path, what, ": offset: expected a multiple of the alignment ", alignment,
                   ", got ", *offset);
  }
  const int64_t bytes = TensorBytes(layout, elements);
  if (bytes < 0 || static_cast<uint64_t>(bytes) > size_) {
    return Invalid(path, what, ": data of ", GgufTypeName(type), " dims ", DimsText(tensor.dims),
                   " is larger than the file (", size_, " bytes)");
  }
  tensor.bytes = static_cast<uint64_t>(bytes);
  return tensor;
}

absl::Status GgufFile::PlaceTensors(const Cursor& cursor, uint64_t alignment,
                                    absl::Span<const uint64_t> relative_offsets) {
  // The data section starts at the first aligned offset after the tensor infos.
  const uint64_t data_start = (cursor.pos() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& tensor = tensors_[i];
    const uint64_t offset = relative_offsets[i];
    if (offset > size_ || data_start > size_ - offset ||
        tensor.bytes > size_ - data_start - offset) {
      return Invalid(path_, "tensor '", absl::CHexEscape(tensor.name), "': data at offset ",
                     offset, " of the data section (file offset ", data_start, " + ", offset,
                     "), ", tensor.bytes, " bytes, extends beyond the end of the file (", size_,
                     " bytes)");
    }
    tensor.offset = data_start + offset;
  }
  return absl::OkStatus();
}

absl::Status GgufFile::IndexTensors() {
  SHARDRT_ASSIGN_OR_RETURN(
      tensors_by_name_,
      IndexByKey(path_, tensors_,
                 [](const GgufTensor& t) -> const std::string& { return t.name; }, "tensor name",
                 "tensors"));
  return absl::OkStatus();
}

absl::Status GgufFile::CheckNoOverlap() const {
  std::vector<uint32_t> by_offset(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) by_offset[i] = static_cast<uint32_t>(i);
  std::sort(by_offset.begin(), by_offset.end(), [this](uint32_t a, uint32_t b) {
    return tensors_[a].offset < tensors_[b].offset ||
           (tensors_[a].offset == tensors_[b].offset && a < b);
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& a = tensors_[by_offset[i - 1]];
    const GgufTensor& b = tensors_[by_offset[i]];
    if (a.offset + a.bytes > b.offset) {
      return Invalid(path_, "tensors '", absl::CHexEscape(a.name), "' (file bytes [", a.offset,
                     ", ", a.offset + a.bytes, ")) and '", absl::CHexEscape(b.name),
                     "' (file bytes [", b.offset, ", ", b.offset + b.bytes, ")) overlap");
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

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(absl::string_view key) const {
  SHARDRT_ASSIGN_OR_RETURN(
      const Value* value,
      FindTyped(key, "an array of float32 or float64", [](uint32_t type, uint32_t e) {
        return type == kArray && (e == kF32 || e == kF64);
      }));
  std::vector<float> result(value->count);  // Parse bounded it by the file's size / stride
  for (uint64_t i = 0; i < value->count; ++i) {
    if (value->element_type == kF32) {
      std::memcpy(&result[i], data_ + value->offset + i * 4, 4);
    } else {
      double v;
      std::memcpy(&v, data_ + value->offset + i * 8, 8);
      result[i] = static_cast<float>(v);
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

}  // namespace shardrt::llama
