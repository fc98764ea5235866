#include "decoder/decoder_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardrt::decoder {
namespace {

ArraySpec F32(std::string name, std::vector<int64_t> dims, int split_dim = -1) {
  return ArraySpec{std::move(name), ElementType::kF32, std::move(dims), split_dim};
}

}  // namespace

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

int64_t ArraySpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string ShardingText(const ArraySpec& spec, int64_t num_partitions) {
  if (spec.split_dim < 0 || num_partitions == 1) return "{replicated}";
  std::vector<int64_t> tiles(spec.dims.size(), 1);
  tiles[spec.split_dim] = num_partitions;
  return absl::StrCat("{devices=[", absl::StrJoin(tiles, ","), "]<=[", num_partitions, "]}");
}

std::vector<int64_t> ShardDims(const ArraySpec& spec, int64_t num_partitions) {
  std::vector<int64_t> dims = spec.dims;
  if (spec.split_dim >= 0) dims[spec.split_dim] /= num_partitions;
  return dims;
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
