// TileAssignment: the array of device (partition) ids behind a tiled sharding, XLA's
// "tile assignment". An array of shape dims() holding each of the ids 0..N-1 exactly once,
// N = product of dims(). It can be given as an explicit row-major list or in XLA's iota form
// `<=[reshape_dims]T(perm)`; either way it is stored expanded, so two assignments that spell
// the same array compare equal.
//
// Immutable value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/shape.h"

namespace shardrt {

class SHARDRT_EXPORT TileAssignment {
 public:
  // The most devices one tile assignment may hold. Bounds the memory any text or proto input
  // can make us allocate.
  static constexpr int64_t kMaxDevices = int64_t{1} << 20;

  // XLA's iota form: iota(product(reshape_dims)) reshaped to reshape_dims, transposed by
  // perm (result dim j is reshape dim perm[j]). `perm` empty means the identity.
  struct IotaForm {
    Shape reshape_dims;
    std::vector<int64_t> perm;
    bool operator==(const IotaForm&) const = default;
  };

  // An empty assignment (no dims, no devices); only useful as a placeholder.
  TileAssignment() = default;

  // `devices` laid out row-major in an array of shape `dims`.
  // Error: InvalidArgument if dims is empty or has a non-positive entry, if it needs more than
  // kMaxDevices devices, if devices.size() differs from the product of dims, or if an id is
  // out of range [0, N) or repeated.
  [[nodiscard]] static absl::StatusOr<TileAssignment> Create(Shape dims,
                                                             std::vector<int64_t> devices);

  // The iota form `<=[reshape_dims]T(perm)` laid out in shape `dims`.
  // Error: InvalidArgument for bad dims (as Create), reshape dims that are not positive or
  // whose product differs from that of dims, or a perm that is not a permutation of
  // 0..reshape_dims.size()-1.
  [[nodiscard]] static absl::StatusOr<TileAssignment> Iota(Shape dims, IotaForm iota);
  // Devices 0..N-1 in order (`<=[N]`).
  [[nodiscard]] static absl::StatusOr<TileAssignment> Iota(Shape dims);

  const Shape& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  // Row-major device ids; size num_devices().
  const std::vector<int64_t>& devices() const { return devices_; }
  int64_t num_devices() const { return static_cast<int64_t>(devices_.size()); }

  // This array transposed: result dim j is this array's dim perm[j].
  // Error: InvalidArgument if perm is not a permutation of 0..rank()-1.
  [[nodiscard]] absl::StatusOr<TileAssignment> Transpose(std::span<const int64_t> perm) const;
  // The same row-major device list in an array of shape `dims`.
  // Error: InvalidArgument if dims is invalid or its product differs from num_devices().
  [[nodiscard]] absl::StatusOr<TileAssignment> Reshape(Shape dims) const;

  // The coarsest iota form spelling devices() (no reshape dim of size 1, no two reshape dims
  // that could be merged), or nullopt if the list is not a transposed iota. For 0..N-1 in
  // order this is {[N], {}}. The result is unique for a given device list.
  std::optional<IotaForm> AsIota() const;

  bool operator==(const TileAssignment&) const = default;

 private:
  TileAssignment(Shape dims, std::vector<int64_t> devices)
      : dims_(std::move(dims)), devices_(std::move(devices)) {}

  Shape dims_;
  std::vector<int64_t> devices_;
};

// Transposes a row-major array of shape `dims`: result dim j is dim perm[j]. Preconditions
// (unchecked): perm is a permutation of 0..dims.size()-1 and data.size() == product(dims).
SHARDRT_EXPORT std::vector<int64_t> TransposeArray(std::span<const int64_t> data,
                                                   std::span<const int64_t> dims,
                                                   std::span<const int64_t> perm);

// OK if `perm` is a permutation of 0..rank-1; otherwise InvalidArgument naming `what`.
[[nodiscard]] SHARDRT_EXPORT absl::Status CheckPermutation(std::span<const int64_t> perm,
                                                           int64_t rank, absl::string_view what);

}  // namespace shardrt
