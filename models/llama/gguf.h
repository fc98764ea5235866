// GgufFile: a read-only view of a GGUF model file (version 2 or 3): its metadata and where its
// tensors lie. The tensor types' storage and their dequantization to f32 are in quants.h.
//
// The file is memory-mapped; every count, length, offset and size is checked against the file
// and against fixed bounds before it is used, so a truncated, corrupt or hostile file gives an
// InvalidArgument error naming the file, the field and what was expected, never a crash or an
// unbounded allocation.
//
// Dims are in GGUF order: dims[0] varies fastest (the row length). A tensor with dims [n0, n1]
// is, row-major, n1 rows of n0 values; quantized blocks run along dims[0].
//
// Thread safety: a GgufFile is immutable after Open; every const method may be called from
// several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardrt::llama {

// The most dims a tensor has (GGML_MAX_DIMS).
inline constexpr size_t kGgufMaxDims = 4;

// GGUF tensor types this reader accepts (values as in the GGUF specification); quants.h
// dequantizes them.
enum class GgufType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

// "F32", "Q4_1", ... for every type GGML defines (also those this reader does not dequantize);
// "type N" for any other value.
std::string GgufTypeName(uint32_t type);

// One tensor: name, dims (GGUF order), type, and where its data lies in the file.
struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;
  GgufType type = GgufType::kF32;
  uint64_t offset = 0;  // from the start of the file
  uint64_t bytes = 0;   // size of the data in the file

  int64_t num_elements() const;
  // Row length (dims[0]) and row count (product of the other dims; 1 for a vector).
  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t num_rows() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Errors: NotFound / PermissionDenied if it cannot be opened;
  // InvalidArgument for anything malformed (bad magic or version, a count or string length
  // beyond the file or the bounds, an unknown metadata type, a tensor of an unsupported type,
  // a tensor whose data lies outside the file or overlaps another's, a duplicate key or tensor
  // name), naming the path and the field.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }

  // Metadata lookups. Errors: NotFound naming the key if it is absent; InvalidArgument naming
  // the key, the expected and the actual type if it has another type. Integer getters accept
  // any integer type whose value fits; GetFloat accepts f32 and f64.
  [[nodiscard]] absl::StatusOr<std::string> GetString(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<double> GetFloat(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<bool> GetBool(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> GetStringArray(
      absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;
  // An array of float32 or float64 values, as float (e.g. tokenizer.ggml.scores).
  [[nodiscard]] absl::StatusOr<std::vector<float>> GetFloatArray(absl::string_view key) const;
  bool HasKey(absl::string_view key) const;
  // The metadata keys, in file order.
  std::vector<std::string> MetadataKeys() const;

  // All tensors in file order; Find returns null when `name` is absent.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* Find(absl::string_view name) const;

  // The whole file as mapped, valid while this GgufFile lives (empty for an empty file); a
  // tensor's data is bytes().subspan(tensor.offset, tensor.bytes).
  absl::Span<const std::byte> bytes() const { return {data_, size_}; }

  // Hands the mapping's resident pages back to the system (the file is unchanged; the next
  // read of a page maps it again from the page cache): for a loader that is done with the
  // tensors it has read, so the file's pages do not add to the process's resident memory.
  // Safe to call at any time, also while other threads read.
  void ReleasePages() const;

 private:
  // A parsed metadata value. Its bytes stay in the mapping (validated by Open) and are decoded
  // by the getters, so a long array costs nothing until it is asked for.
  struct Value {
    std::string key;
    uint32_t type = 0;          // GGUF value type
    uint32_t element_type = 0;  // arrays: the elements' GGUF value type
    uint64_t count = 0;         // arrays: the element count
    size_t offset = 0;  // where the value starts in the file (for an array: its first element)
  };

  // Bounds-checked reads of the mapping (gguf.cc).
  class Cursor;
  // The header's counts.
  struct Counts {
    uint64_t tensors = 0;
    uint64_t keys = 0;
  };

  GgufFile() = default;
  // Parses the mapped bytes data_[0, size_) into the members, by the steps below in file
  // order; Open's errors. Each step reads at `cursor` and leaves it after what it read.
  absl::Status Parse();
  // Magic, version (into version_) and the counts, bounded by the bytes left.
  absl::StatusOr<Counts> ReadHeader(Cursor& cursor);
  // `count` key/values into metadata_, then the index metadata_by_key_ (duplicates rejected).
  absl::Status ReadMetadata(Cursor& cursor, uint64_t count);
  // Key/value #`index`: its key, type and where its value lies; the value is walked over.
  absl::StatusOr<Value> ReadKeyValue(Cursor& cursor, uint64_t index);
  // general.alignment if present (a power-of-two uint32), else the default 32.
  absl::StatusOr<uint64_t> Alignment() const;
  // `count` tensor infos into tensors_ (offset still unset); returns each tensor's offset in
  // the data section.
  absl::StatusOr<std::vector<uint64_t>> ReadTensorInfos(Cursor& cursor, uint64_t count,
                                                        uint64_t alignment);
  // Tensor info #`index`: name, dims, supported type, and an `*offset` (in the data section) a
  // multiple of `alignment`.
  absl::StatusOr<GgufTensor> ReadTensorInfo(Cursor& cursor, uint64_t index, uint64_t alignment,
                                            uint64_t* offset);
  // Sets each tensor's file offset from the data section's start (the first multiple of
  // `alignment` at or after `cursor`) and its `relative_offsets`, each inside the file.
  absl::Status PlaceTensors(const Cursor& cursor, uint64_t alignment,
                            absl::Span<const uint64_t> relative_offsets);
  // The index tensors_by_name_; duplicate names rejected.
  absl::Status IndexTensors();
  // Rejects two tensors whose data overlap.
  absl::Status CheckNoOverlap() const;
  const Value* FindValue(absl::string_view key) const;
  // The value of `key` if `accept(type, element_type)` holds for it; NotFound, or
  // InvalidArgument saying it is not `expected`.
  absl::StatusOr<const Value*> FindTyped(absl::string_view key, absl::string_view expected,
                                         bool (*accept)(uint32_t type,
                                                        uint32_t element_type)) const;

  std::string path_;
  uint32_t version_ = 0;
  const std::byte* data_ = nullptr;  // the mapping
  size_t size_ = 0;
  std::vector<Value> metadata_;            // in file order
  std::vector<uint32_t> metadata_by_key_;  // indices into metadata_, sorted by key
  std::vector<GgufTensor> tensors_;        // in file order
  std::vector<uint32_t> tensors_by_name_;  // indices into tensors_, sorted by name
};

}  // namespace shardrt::llama
