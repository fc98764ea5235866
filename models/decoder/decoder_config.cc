#include "decoder/decoder_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/array_shape.h"

namespace shardrt::decoder {
namespace {

ArraySpec F32(std::string name, std::vector<int64_t> dims, int split_dim = -1) {
  return ArraySpec{std::move(name), ElementType::kF32, std::move(dims), split_dim};
}

// a * b and a + b for non-negative counts, INT64_MAX when the result does not fit (a negative
// operand counts as 0).
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a <= 0 || b <= 0) return 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(std::max<int64_t>(a, 0), std::max<int64_t>(b, 0), &r) ? INT64_MAX
                                                                                      : r;
}

}  // namespace

ModelFootprint Footprint(const DecoderConfig& c) {
  // One kind of array: its shape, how many the model has, whether it is replicated on every
  // device, and whether it grows with max_seq.
  struct Kind {
    const char* name;
    std::vector<int64_t> dims;
    int64_t count;
    bool replicated;
    bool grows_with_max_seq;
  };
  const int64_t d = c.d_model, qkv = SatMul(c.n_heads, c.head_dim()), f = c.hidden();
  const int64_t layers = c.n_layers;
  const Kind weights[] = {
      {"embed", {c.vocab, d}, 1, true, false},
      {"pos_embed", {c.max_seq, d}, 1, true, true},
      {"attn_norm", {d}, layers, true, false},
      {"wq", {d, qkv}, layers, false, false},
      {"wk", {d, qkv}, layers, false, false},
      {"wv", {d, qkv}, layers, false, false},
      {"wo", {qkv, d}, layers, false, false},
      {"mlp_norm", {d}, layers, true, false},
      {"w1", {d, f}, layers, false, false},
      {"w2", {f, d}, layers, false, false},
      {"final_norm", {d}, 1, true, false},
      {"w_out", {d, c.vocab}, 1, true, false},
  };
  const Kind cache = {"k_cache", {c.n_heads, c.max_seq, c.head_dim()}, SatMul(2, layers), false,
                      true};
  ModelFootprint out;
  auto account = [&](const Kind& k, bool is_weight) {
    int64_t bytes = 4;
    for (int64_t dim : k.dims) bytes = SatMul(bytes, dim);
    if (bytes > out.largest_array_bytes) {
      out.largest_array = k.name;
      out.largest_dims = k.dims;
      out.largest_array_bytes = bytes;
      out.largest_grows_with_max_seq = k.grows_with_max_seq;
    }
    const int64_t all = SatMul(bytes, k.count);
    if (is_weight) out.weight_bytes = SatAdd(out.weight_bytes, all);
    out.device_bytes =
        SatAdd(out.device_bytes, k.replicated ? SatMul(all, c.num_partitions) : all);
  };
  for (const Kind& k : weights) account(k, /*is_weight=*/true);
  account(cache, /*is_weight=*/false);
  return out;
}

std::string BytesText(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  if (value == static_cast<double>(static_cast<int64_t>(value))) {
    return absl::StrCat(static_cast<int64_t>(value), " ", units[unit]);
  }
  if (value < 10) return absl::StrFormat("%.2f %s", value, units[unit]);
  if (value < 100) return absl::StrFormat("%.1f %s", value, units[unit]);
  return absl::StrFormat("%.0f %s", value, units[unit]);
}

absl::Status ValidateConfig(const DecoderConfig& c) {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab", c.vocab},           {"d_model", c.d_model},
      {"n_heads", c.n_heads},       {"hidden", c.hidden()},
      {"n_layers", c.n_layers},     {"max_seq", c.max_seq},
      {"prompt_len", c.prompt_len}, {"num_partitions", c.num_partitions}};
  for (const auto& [name, value] : positive) {
    if (value < 1)
      return absl::InvalidArgumentError(absl::StrCat(name, " must be >= 1, got ", value));
  }
  if (c.d_model % c.n_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("d_model (", c.d_model, ") must be divisible by n_heads (", c.n_heads, ")"));
  }
  if (c.n_heads % c.num_partitions != 0) {
    return absl::InvalidArgumentError(absl::StrCat("n_heads (", c.n_heads,
                                                   ") must be divisible by the number of devices (",
                                                   c.num_partitions, ")"));
  }
  if (c.hidden() % c.num_partitions != 0) {
    return absl::InvalidArgumentError(absl::StrCat("mlp_hidden (", c.hidden(),
                                                   ") must be divisible by the number of devices (",
                                                   c.num_partitions, ")"));
  }
  if (c.prompt_len > c.max_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt_len (", c.prompt_len, ") must not exceed max_seq (", c.max_seq, ")"));
  }
  if (c.vocab > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab (", c.vocab, ") does not fit s32"));
  }
  if (!(c.norm_eps > 0)) return absl::InvalidArgumentError("norm_eps must be > 0");
  const ModelFootprint f = Footprint(c);
  const std::string sizes = absl::StrCat("(d_model = ", c.d_model, ", n_layers = ", c.n_layers,
                                         ", max_seq = ", c.max_seq, ", num_partitions = ",
                                         c.num_partitions, ")");
  if (f.largest_array_bytes > kMaxModelArrayBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array ", f.largest_array, " ", ShapeToString({ElementType::kF32, f.largest_dims}),
        " would take ",
        BytesText(f.largest_array_bytes), ", over the limit of ",
        BytesText(kMaxModelArrayBytes), " per array ", sizes));
  }
  if (f.weight_bytes > kMaxModelWeightBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the weights would take ", BytesText(f.weight_bytes), ", over the limit of ",
        BytesText(kMaxModelWeightBytes), " ", sizes));
  }
  if (f.device_bytes > kMaxModelDeviceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the devices would hold ", BytesText(f.device_bytes),
        " of weights and KV caches, over the limit of ", BytesText(kMaxModelDeviceBytes), " ",
        sizes));
  }
  return absl::OkStatus();
}

absl::Status ValidateGeneration(const DecoderConfig& c, int64_t num_tokens) {
  if (num_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tokens must be >= 1, got ", num_tokens));
  }
  if (c.prompt_len + num_tokens - 1 > c.max_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a prompt of ", c.prompt_len, " and ", num_tokens, " generated tokens need a KV cache of ",
        c.prompt_len + num_tokens - 1, " positions, but max_seq is ", c.max_seq));
  }
  return absl::OkStatus();
}

std::vector<ArraySpec> WeightSpecs(const DecoderConfig& c) {
  const int64_t d = c.d_model, qkv = c.n_heads * c.head_dim(), f = c.hidden();
  std::vector<ArraySpec> specs;
  specs.push_back(F32("embed", {c.vocab, d}));
  specs.push_back(F32("pos_embed", {c.max_seq, d}));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("layer", i, ".");
    specs.push_back(F32(p + "attn_norm", {d}));
    specs.push_back(F32(p + "wq", {d, qkv}, 1));
    specs.push_back(F32(p + "wk", {d, qkv}, 1));
    specs.push_back(F32(p + "wv", {d, qkv}, 1));
    specs.push_back(F32(p + "wo", {qkv, d}, 0));
    specs.push_back(F32(p + "mlp_norm", {d}));
    specs.push_back(F32(p + "w1", {d, f}, 1));
    specs.push_back(F32(p + "w2", {f, d}, 0));
  }
  specs.push_back(F32("final_norm", {d}));
  specs.push_back(F32("w_out", {d, c.vocab}));
  return specs;
}

std::vector<ArraySpec> CacheSpecs(const DecoderConfig& c) {
  std::vector<ArraySpec> specs;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    for (const char* kv : {"k_cache", "v_cache"}) {
      specs.push_back(
          F32(absl::StrCat("layer", i, ".", kv), {c.n_heads, c.max_seq, c.head_dim()}, 0));
    }
  }
  return specs;
}

}  // namespace shardrt::decoder
