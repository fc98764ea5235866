#include "llama/llama_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llama/gguf.h"
#include "llama/quants.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {
namespace {

absl::Status ExpectDims(const GgufFile& file, const std::string& name,
                        std::vector<int64_t> dims) {
  const GgufTensor* t = file.Find(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": tensor ", name, " is missing"));
  }
  if (t->dims != dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": tensor ", name, " has dims [", absl::StrJoin(t->dims, ","),
        "], expected [", absl::StrJoin(dims, ","), "] from the llama.* metadata"));
  }
  return absl::OkStatus();
}

// A positive size no larger than `max` (a model far beyond any the programs are meant for is
// refused before anything is allocated for it).
absl::StatusOr<int64_t> Size(const GgufFile& file, const std::string& key, int64_t max) {
  SHARDRT_ASSIGN_OR_RETURN(int64_t v, file.GetInt(key));
  if (v < 1 || v > max) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(), ": ", key, " is ",
                                                   v, ", expected 1..", max));
  }
  return v;
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfig::FromGguf(const GgufFile& file, WeightFormat format) {
  SHARDRT_ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  if (arch != "llama") {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": general.architecture is '", arch, "', expected 'llama'"));
  }
  LlamaConfig c;
  SHARDRT_ASSIGN_OR_RETURN(c.n_layers, Size(file, "llama.block_count", 1024));
  SHARDRT_ASSIGN_OR_RETURN(c.d_model, Size(file, "llama.embedding_length", 1 << 16));
  SHARDRT_ASSIGN_OR_RETURN(c.ffn, Size(file, "llama.feed_forward_length", 1 << 18));
  SHARDRT_ASSIGN_OR_RETURN(c.n_heads, Size(file, "llama.attention.head_count", 1024));
  SHARDRT_ASSIGN_OR_RETURN(c.n_kv_heads, Size(file, "llama.attention.head_count_kv", 1024));
  SHARDRT_ASSIGN_OR_RETURN(c.context, Size(file, "llama.context_length", 1 << 20));
  SHARDRT_ASSIGN_OR_RETURN(c.rope_base, file.GetFloat("llama.rope.freq_base"));
  SHARDRT_ASSIGN_OR_RETURN(c.norm_eps, file.GetFloat("llama.attention.layer_norm_rms_epsilon"));
  // The vocabulary: llama.vocab_size when present, else the tokenizer's token count.
  const GgufTensor* embd = file.Find("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": tensor token_embd.weight is missing or not 2-D"));
  }
  c.vocab = embd->dims[1];
  if (file.HasKey("llama.vocab_size")) {
    SHARDRT_ASSIGN_OR_RETURN(int64_t v, Size(file, "llama.vocab_size", 1 << 22));
    if (v != c.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF file ", file.path(), ": llama.vocab_size is ", v,
                       " but token_embd.weight has ", c.vocab, " rows"));
    }
  }
  if (c.d_model % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": embedding_length ", c.d_model, ", head_count ", c.n_heads,
        " and head_count_kv ", c.n_kv_heads,
        " do not make whole heads and whole key/value groups"));
  }
  c.head_dim = c.d_model / c.n_heads;
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(), ": head dim ",
                                                   c.head_dim, " is odd; RoPE needs pairs"));
  }
  if (file.HasKey("llama.rope.dimension_count")) {
    SHARDRT_ASSIGN_OR_RETURN(int64_t rope_dims, file.GetInt("llama.rope.dimension_count"));
    if (rope_dims != c.head_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF file ", file.path(), ": llama.rope.dimension_count is ", rope_dims,
                       ", expected the head dim ", c.head_dim, " (partial RoPE is not supported)"));
    }
  }
  c.tied_embeddings = file.Find("output.weight") == nullptr;
  if (!c.tied_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(),
        ": has an output.weight; only tied embeddings (logits from token_embd) are supported"));
  }
  SHARDRT_RETURN_IF_ERROR(ExpectDims(file, "token_embd.weight", {c.d_model, c.vocab}));
  SHARDRT_RETURN_IF_ERROR(ExpectDims(file, "output_norm.weight", {c.d_model}));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_norm.weight", {c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_q.weight", {c.d_model, c.q_dim()}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_k.weight", {c.d_model, c.kv_dim()}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_v.weight", {c.d_model, c.kv_dim()}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_output.weight", {c.q_dim(), c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_norm.weight", {c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_gate.weight", {c.d_model, c.ffn}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_up.weight", {c.d_model, c.ffn}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_down.weight", {c.ffn, c.d_model}));
  }
  if (format == WeightFormat::kNative) {
    SHARDRT_ASSIGN_OR_RETURN(c.native, NativeWeightsOf(file, c));
  }
  return c;
}

absl::StatusOr<NativeWeights> NativeWeightsOf(const GgufFile& file, const LlamaConfig& c) {
  // The type every tensor of `suffixes` has in every layer, or an error naming two that differ.
  auto one_type = [&](std::vector<std::string> suffixes) -> absl::StatusOr<GgufType> {
    const GgufTensor* first = nullptr;
    for (int64_t i = 0; i < c.n_layers; ++i) {
      for (const std::string& suffix : suffixes) {
        const std::string name = absl::StrCat("blk.", i, ".", suffix, ".weight");
        const GgufTensor* t = file.Find(name);
        if (t == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("GGUF file ", file.path(), ": tensor ", name, " is missing"));
        }
        if (first == nullptr) first = t;
        if (t->type != first->type) {
          return absl::InvalidArgumentError(absl::StrCat(
              "GGUF file ", file.path(), ": ", name, " is ",
              GgufTypeName(static_cast<uint32_t>(t->type)), " but ", first->name, " is ",
              GgufTypeName(static_cast<uint32_t>(first->type)),
              ": native weights need one type per stacked weight (load it with f32 weights)"));
        }
      }
    }
    return first->type;
  };
  NativeWeights w;
  const GgufTensor* embd = file.Find("token_embd.weight");
  if (embd == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": tensor token_embd.weight is missing"));
  }
  w.token_embd = embd->type;
  SHARDRT_ASSIGN_OR_RETURN(w.wqkv, one_type({"attn_q", "attn_k", "attn_v"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wo, one_type({"attn_output"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wgu, one_type({"ffn_gate", "ffn_up"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wdown, one_type({"ffn_down"}));
  return w;
}

absl::Status CheckPartitions(const LlamaConfig& c, int64_t partitions) {
  if (partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("devices ", partitions, ": expected >= 1"));
  }
  const struct {
    const char* what;
    int64_t size;
    int64_t multiple;  // of the per-device slice
  } checks[] = {{"the query width (heads x head dim)", c.q_dim(), 1},
                {"the key/value width (kv heads x head dim)", c.kv_dim(), 1},
                {"the embedding width", c.d_model, 1},
                {"the vocabulary", c.vocab, 1},
                {"the feed-forward width", c.ffn,
                 c.native ? LayoutOf(c.native->wdown).block_elements : 32}};
  for (const auto& check : checks) {
    if (check.size % partitions != 0 || (check.size / partitions) % check.multiple != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "devices ", partitions, ": ", check.what, " ", check.size, " does not split into ",
          partitions, " equal slices", check.multiple > 1 ? absl::StrCat(" of whole ", check.multiple, "-value blocks") : ""));
    }
  }
  return absl::OkStatus();
}

std::vector<ArraySpec> WeightSpecs(const LlamaConfig& c) {
  // A matrix: f32 [..., rows, cols], or with native weights its rows' bytes in `type`.
  auto f32 = [&](std::string name, std::vector<int64_t> dims, int split) {
    if (c.native && dims.size() >= 2) {
      const NativeWeights& n = *c.native;
      const GgufType type = name == "token_embd" ? n.token_embd
                            : name == "wqkv"     ? n.wqkv
                            : name == "wo"       ? n.wo
                            : name == "wgu"      ? n.wgu
                                                 : n.wdown;
      if (name == "token_embd" || name.starts_with("w")) {
        const BlockLayout layout = LayoutOf(type);
        dims.back() = dims.back() / layout.block_elements * layout.block_bytes;
        return ArraySpec{std::move(name), ElementType::kU8, std::move(dims), split};
      }
    }
    return ArraySpec{std::move(name), ElementType::kF32, std::move(dims), split};
  };
  std::vector<ArraySpec> specs;
  specs.push_back(f32("token_embd", {c.vocab, c.d_model}, 0));
  const int64_t l = c.n_layers;
  specs.push_back(f32("attn_norm", {l, c.d_model}, -1));
  specs.push_back(f32("wqkv", {l, c.q_dim() + 2 * c.kv_dim(), c.d_model}, 1));
  specs.push_back(f32("wo", {l, c.d_model, c.q_dim()}, 1));
  specs.push_back(f32("ffn_norm", {l, c.d_model}, -1));
  specs.push_back(f32("wgu", {l, 2 * c.ffn, c.d_model}, 1));
  specs.push_back(f32("wdown", {l, c.d_model, c.ffn}, 2));
  specs.push_back(f32("output_norm", {c.d_model}, -1));
  return specs;
}

std::vector<ArraySpec> CacheSpecs(const LlamaConfig& c, int64_t p, int64_t rows,
                                  int64_t cache_len) {
  std::vector<int64_t> dims = {c.n_layers, p, rows, cache_len / p, c.n_kv_heads, c.head_dim};
  return {ArraySpec{"k_cache", ElementType::kF32, dims, 1},
          ArraySpec{"v_cache", ElementType::kF32, dims, 1}};
}

}  // namespace shardrt::llama
