#include "shardrt/sharding/tile_assignment.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"
#include "absl/strings/str_join.h"

namespace shardrt {
namespace {

// Checks tile-assignment dims and returns their product (at most kMaxDevices).
absl::StatusOr<int64_t> CheckTileDims(std::span<const int64_t> dims, absl::string_view what) {
  if (dims.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must not be empty"));
  }
  // Data dims plus at most two subgroup dims (manual, replicated).
  if (static_cast<int64_t>(dims.size()) > limits::kMaxRank + 2) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", dims.size(),
                                                   " entries; the limit is ",
                                                   limits::kMaxRank + 2));
  }
  int64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", i, " of ", what, " ",
                                                     DimsToString(dims), " is ", dims[i],
                                                     "; it must be positive"));
    }
  }
  for (int64_t d : dims) {
    if (!CheckedMul(product, d, &product) || product > TileAssignment::kMaxDevices) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", DimsToString(dims),
                                                     " need more than ",
                                                     TileAssignment::kMaxDevices, " devices"));
    }
  }
  return product;
}

}  // namespace

absl::Status CheckPermutation(std::span<const int64_t> perm, int64_t rank, absl::string_view what) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(what, " (", absl::StrJoin(perm, ","),
                                                   ") is not a permutation of 0..", rank - 1));
  };
  if (static_cast<int64_t>(perm.size()) != rank) return bad();
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return bad();
    seen[p] = true;
  }
  return absl::OkStatus();
}

std::vector<int64_t> TransposeArray(std::span<const int64_t> data, std::span<const int64_t> dims,
                                    std::span<const int64_t> perm) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> in_strides(rank);
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= dims[i];
  }
  std::vector<int64_t> out_dims(rank), out_strides(rank);
  for (int64_t j = 0; j < rank; ++j) {
    out_dims[j] = dims[perm[j]];
    out_strides[j] = in_strides[perm[j]];
  }
  std::vector<int64_t> out(data.size());
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t& value : out) {
    value = data[offset];
    for (int64_t j = rank - 1; j >= 0; --j) {
      if (++index[j] < out_dims[j]) {
        offset += out_strides[j];
        break;
      }
      offset -= (out_dims[j] - 1) * out_strides[j];
      index[j] = 0;
    }
  }
  return out;
}

absl::StatusOr<TileAssignment> TileAssignment::Create(Shape dims, std::vector<int64_t> devices) {
  absl::StatusOr<int64_t> count = CheckTileDims(dims, "tile dims");
  if (!count.ok()) return count.status();
  if (static_cast<int64_t>(devices.size()) != *count) {
    return absl::InvalidArgumentError(absl::StrCat("tile assignment has ", devices.size(),
                                                   " devices but tile dims ", DimsToString(dims),
                                                   " need ", *count));
  }
  std::vector<bool> seen(devices.size(), false);
  for (int64_t d : devices) {
    if (d < 0 || d >= *count) {
      return absl::InvalidArgumentError(
          absl::StrCat("device id ", d, " out of range [0, ", *count, ")"));
    }
    if (seen[d]) return absl::InvalidArgumentError(absl::StrCat("duplicate device id ", d));
    seen[d] = true;
  }
  return TileAssignment(std::move(dims), std::move(devices));
}

absl::StatusOr<TileAssignment> TileAssignment::Iota(Shape dims, IotaForm iota) {
  absl::StatusOr<int64_t> count = CheckTileDims(dims, "tile dims");
  if (!count.ok()) return count.status();
  absl::StatusOr<int64_t> iota_count = CheckTileDims(iota.reshape_dims, "iota reshape dims");
  if (!iota_count.ok()) return iota_count.status();
  if (*iota_count != *count) {
    return absl::InvalidArgumentError(
        absl::StrCat("iota reshape dims ", DimsToString(iota.reshape_dims), " hold ",
                     *iota_count, " devices but tile dims ", DimsToString(dims), " need ",
                     *count));
  }
  const int64_t rank = static_cast<int64_t>(iota.reshape_dims.size());
  if (iota.perm.empty()) {
    iota.perm.resize(rank);
    std::iota(iota.perm.begin(), iota.perm.end(), 0);
  }
  absl::Status perm_ok = CheckPermutation(iota.perm, rank, "iota transpose");
  if (!perm_ok.ok()) return perm_ok;
  std::vector<int64_t> devices(*count);
  std::iota(devices.begin(), devices.end(), 0);
  devices = TransposeArray(devices, iota.reshape_dims, iota.perm);
  return TileAssignment(std::move(dims), std::move(devices));
}

absl::StatusOr<TileAssignment> TileAssignment::Iota(Shape dims) {
  absl::StatusOr<int64_t> count = CheckTileDims(dims, "tile dims");
  if (!count.ok()) return count.status();
  return Iota(std::move(dims), IotaForm{Shape{*count}, {}});
}

absl::StatusOr<TileAssignment> TileAssignment::Transpose(std::span<const int64_t> perm) const {
  absl::Status perm_ok = CheckPermutation(perm, rank(), "tile assignment transpose");
  if (!perm_ok.ok()) return perm_ok;
  Shape dims(rank());
  for (int64_t j = 0; j < rank(); ++j) dims[j] = dims_[perm[j]];
  return TileAssignment(std::move(dims), TransposeArray(devices_, dims_, perm));
}

absl::StatusOr<TileAssignment> TileAssignment::Reshape(Shape dims) const {
  absl::StatusOr<int64_t> count = CheckTileDims(dims, "tile dims");
  if (!count.ok()) return count.status();
  if (*count != num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape tile dims ",
                                                   DimsToString(dims_), " to ",
                                                   DimsToString(dims)));
  }
  return TileAssignment(std::move(dims), devices_);
}

std::optional<TileAssignment::IotaForm> TileAssignment::AsIota() const {
  const std::vector<int64_t>& list = devices_;
  const int64_t n = num_devices();
  if (n == 0 || list[0] != 0) return std::nullopt;
  // Peel output dims from the minor end: each is the longest run of equally spaced ids at
  // multiples of the block size found so far. (size, stride) pairs, minor to major.
  std::vector<std::pair<int64_t, int64_t>> minor_to_major;
  int64_t block = 1;
  while (block < n) {
    const int64_t stride = list[block];
    const int64_t max_size = n / block;
    int64_t size = 1;
    while (size < max_size && list[size * block] == size * stride) ++size;
    if (size == 1 || n % (size * block) != 0) return std::nullopt;
    minor_to_major.emplace_back(size, stride);
    block *= size;
  }
  // The strides, sorted, must be those of a row-major array of the sizes.
  std::vector<size_t> by_stride(minor_to_major.size());
  std::iota(by_stride.begin(), by_stride.end(), 0);
  std::sort(by_stride.begin(), by_stride.end(), [&](size_t a, size_t b) {
    return minor_to_major[a].second < minor_to_major[b].second;
  });
  int64_t expected = 1;
  for (size_t i : by_stride) {
    if (minor_to_major[i].second != expected) return std::nullopt;
    expected *= minor_to_major[i].first;
  }
  // Check every id (odometer over the output dims, minor dim fastest).
  const size_t k = minor_to_major.size();
  std::vector<int64_t> digit(k, 0);
  int64_t value = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (list[i] != value) return std::nullopt;
    for (size_t j = 0; j < k; ++j) {
      auto [size, stride] = minor_to_major[j];
      if (++digit[j] < size) {
        value += stride;
        break;
      }
      value -= (size - 1) * stride;
      digit[j] = 0;
    }
  }
  if (k <= 1) return IotaForm{Shape{n}, {}};
  // Reshape dims: major (largest stride) first. Output dim j (major to minor) is the
  // reshape dim holding its stride.
  IotaForm form;
  std::vector<int64_t> reshape_index(k);
  for (size_t r = 0; r < k; ++r) {
    size_t i = by_stride[k - 1 - r];
    form.reshape_dims.push_back(minor_to_major[i].first);
    reshape_index[i] = static_cast<int64_t>(r);
  }
  for (size_t j = 0; j < k; ++j) form.perm.push_back(reshape_index[k - 1 - j]);
  return form;
}

}  // namespace shardrt
