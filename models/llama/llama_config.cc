#include "llama/llama_config.h"

#include <cmath>

#include "absl/strings/escaping.h"
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
  LlamaConfig c;
  if (arch == "llama") {
    c.architecture = Architecture::kLlama;
    c.rope_style = RopeStyle::kInterleaved;
  } else if (arch == "qwen2") {
    c.architecture = Architecture::kQwen2;
    c.rope_style = RopeStyle::kHalves;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": general.architecture is '",
                     absl::CHexEscape(arch), "'; supported: 'llama', 'qwen2'"));
  }
  const std::string k = arch + ".";
  SHARDRT_ASSIGN_OR_RETURN(c.n_layers, Size(file, k + "block_count", 1024));
  SHARDRT_ASSIGN_OR_RETURN(c.d_model, Size(file, k + "embedding_length", 1 << 16));
  SHARDRT_ASSIGN_OR_RETURN(c.ffn, Size(file, k + "feed_forward_length", 1 << 18));
  SHARDRT_ASSIGN_OR_RETURN(c.n_heads, Size(file, k + "attention.head_count", 1024));
  // Without head_count_kv every head has its own keys and values (llama.cpp's default).
  c.n_kv_heads = c.n_heads;
  if (file.HasKey(k + "attention.head_count_kv")) {
    SHARDRT_ASSIGN_OR_RETURN(c.n_kv_heads, Size(file, k + "attention.head_count_kv", 1024));
  }
  SHARDRT_ASSIGN_OR_RETURN(c.context, Size(file, k + "context_length", 1 << 20));
  // RoPE's base: 10000 when absent (older Llama-2-style files), as llama.cpp and transformers.
  c.rope_base = 10000.0;
  if (file.HasKey(k + "rope.freq_base")) {
    SHARDRT_ASSIGN_OR_RETURN(c.rope_base, file.GetFloat(k + "rope.freq_base"));
  }
  SHARDRT_ASSIGN_OR_RETURN(c.norm_eps, file.GetFloat(k + "attention.layer_norm_rms_epsilon"));
  // Non-finite values would make every activation NaN (or, written into a program, not
  // compile): refused by name.
  if (!std::isfinite(c.rope_base) || c.rope_base <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(), ": ", k,
                                                   "rope.freq_base is ", c.rope_base,
                                                   ", expected a finite number > 0"));
  }
  if (!std::isfinite(c.norm_eps) || c.norm_eps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": ", k, "attention.layer_norm_rms_epsilon is ",
                     c.norm_eps, ", expected a finite number >= 0"));
  }
  // The vocabulary: the embedding's rows; <arch>.vocab_size, when present, must agree.
  const GgufTensor* embd = file.Find("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": tensor token_embd.weight is missing or not 2-D"));
  }
  c.vocab = embd->dims[1];
  if (file.HasKey(k + "vocab_size")) {
    SHARDRT_ASSIGN_OR_RETURN(int64_t v, Size(file, k + "vocab_size", 1 << 22));
    if (v != c.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF file ", file.path(), ": ", k, "vocab_size is ", v,
                       " but token_embd.weight has ", c.vocab, " rows"));
    }
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": head_count ", c.n_heads, " and head_count_kv ",
                     c.n_kv_heads, " do not make whole key/value groups"));
  }
  // The head size: attention.key_length (= value_length) when present, else the embedding
  // width over the heads.
  if (file.HasKey(k + "attention.key_length") || file.HasKey(k + "attention.value_length")) {
    SHARDRT_ASSIGN_OR_RETURN(int64_t key_length, Size(file, k + "attention.key_length", 1 << 12));
    SHARDRT_ASSIGN_OR_RETURN(int64_t value_length,
                             Size(file, k + "attention.value_length", 1 << 12));
    if (key_length != value_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF file ", file.path(), ": ", k, "attention.key_length ", key_length,
          " differs from value_length ", value_length, " (supported: equal head sizes)"));
    }
    c.head_dim = key_length;
  } else {
    if (c.d_model % c.n_heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF file ", file.path(), ": embedding_length ", c.d_model,
                       " is not a whole number of ", c.n_heads, " heads"));
    }
    c.head_dim = c.d_model / c.n_heads;
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(), ": head dim ",
                                                   c.head_dim, " is odd; RoPE needs pairs"));
  }
  // RoPE's width: the whole head when absent.
  if (file.HasKey(k + "rope.dimension_count")) {
    SHARDRT_ASSIGN_OR_RETURN(int64_t rope_dims, file.GetInt(k + "rope.dimension_count"));
    if (rope_dims != c.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF file ", file.path(), ": ", k, "rope.dimension_count is ", rope_dims,
          ", expected the head dim ", c.head_dim, " (partial RoPE is not supported)"));
    }
  }
  if (file.HasKey(k + "rope.scaling.type")) {
    SHARDRT_ASSIGN_OR_RETURN(std::string scaling, file.GetString(k + "rope.scaling.type"));
    if (scaling != "none") {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF file ", file.path(), ": ", k, "rope.scaling.type is '", absl::CHexEscape(scaling),
          "'; supported: 'none' (and Llama 3.1's rope_freqs.weight)"));
    }
  }
  if (const GgufTensor* freqs = file.Find("rope_freqs.weight")) {
    if (freqs->dims != std::vector<int64_t>{c.head_dim / 2}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF file ", file.path(), ": tensor rope_freqs.weight has dims [",
          absl::StrJoin(freqs->dims, ","), "], expected [", c.head_dim / 2, "]"));
    }
    c.rope_freq_factors.resize(size_t(c.head_dim / 2));
    SHARDRT_RETURN_IF_ERROR(Dequantize(file, *freqs, 0, 1, 0, c.head_dim / 2,
                                       absl::MakeSpan(c.rope_freq_factors)));
    for (size_t i = 0; i < c.rope_freq_factors.size(); ++i) {
      const float f = c.rope_freq_factors[i];
      if (!std::isfinite(f) || f <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("GGUF file ", file.path(), ": rope_freqs.weight[", i, "] is ", f,
                         ", expected a finite positive factor"));
      }
    }
  }
  c.tied_embeddings = file.Find("output.weight") == nullptr;
  c.qkv_bias = c.architecture == Architecture::kQwen2 || file.Find("blk.0.attn_q.bias") != nullptr;
  SHARDRT_RETURN_IF_ERROR(ExpectDims(file, "token_embd.weight", {c.d_model, c.vocab}));
  SHARDRT_RETURN_IF_ERROR(ExpectDims(file, "output_norm.weight", {c.d_model}));
  if (!c.tied_embeddings) {
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, "output.weight", {c.d_model, c.vocab}));
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_norm.weight", {c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_q.weight", {c.d_model, c.q_dim()}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_k.weight", {c.d_model, c.kv_dim()}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_v.weight", {c.d_model, c.kv_dim()}));
    if (c.qkv_bias) {
      SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_q.bias", {c.q_dim()}));
      SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_k.bias", {c.kv_dim()}));
      SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_v.bias", {c.kv_dim()}));
    }
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "attn_output.weight", {c.q_dim(), c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_norm.weight", {c.d_model}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_gate.weight", {c.d_model, c.ffn}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_up.weight", {c.d_model, c.ffn}));
    SHARDRT_RETURN_IF_ERROR(ExpectDims(file, p + "ffn_down.weight", {c.ffn, c.d_model}));
    // Tensors of other blocks' forms are refused rather than ignored.
    for (const char* extra : {"attn_output.bias", "ffn_gate.bias", "ffn_up.bias",
                              "ffn_down.bias", "ffn_gate_inp.weight", "attn_q_norm.weight"}) {
      if (file.Find(p + extra) != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("GGUF file ", file.path(), ": tensor ", p, extra,
                         " is not supported (", arch, " blocks: attn_norm, attn_q/k/v",
                         c.architecture == Architecture::kQwen2 ? " with biases" : "",
                         ", attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down)"));
      }
    }
  }
  c.ffn_block = LayoutOf(file.Find("blk.0.ffn_down.weight")->type).block_elements;
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
  if (!c.tied_embeddings) {
    const GgufTensor* output = file.Find("output.weight");
    if (output == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF file ", file.path(), ": tensor output.weight is missing"));
    }
    w.output = output->type;
  }
  SHARDRT_ASSIGN_OR_RETURN(w.wqkv, one_type({"attn_q", "attn_k", "attn_v"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wo, one_type({"attn_output"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wgu, one_type({"ffn_gate", "ffn_up"}));
  SHARDRT_ASSIGN_OR_RETURN(w.wdown, one_type({"ffn_down"}));
  return w;
}

absl::StatusOr<ModelSplit> SplitOf(const LlamaConfig& c, int64_t partitions) {
  if (partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("devices ", partitions, ": expected >= 1"));
  }
  auto share = [&](int64_t size, int64_t multiple) {
    const int64_t each = (size + partitions - 1) / partitions;
    return (each + multiple - 1) / multiple * multiple;
  };
  return ModelSplit{.partitions = partitions,
                    .q = share(c.q_dim(), 1),
                    .kv = share(c.kv_dim(), 1),
                    .d = share(c.d_model, 1),
                    .ffn = share(c.ffn, c.ffn_block),
                    .vocab = share(c.vocab, 1)};
}

std::vector<ArraySpec> WeightSpecs(const LlamaConfig& c, const ModelSplit& split) {
  // A matrix: f32 [..., rows, cols], or with native weights its rows' bytes in `type`.
  auto f32 = [&](std::string name, std::vector<int64_t> dims, int split) {
    if (c.native && dims.size() >= 2) {
      const NativeWeights& n = *c.native;
      const GgufType type = name == "token_embd" ? n.token_embd
                            : name == "output"   ? n.output
                            : name == "wqkv"     ? n.wqkv
                            : name == "wo"       ? n.wo
                            : name == "wgu"      ? n.wgu
                                                 : n.wdown;
      if (name == "token_embd" || name == "output" || name.starts_with("w")) {
        const BlockLayout layout = LayoutOf(type);
        dims.back() = dims.back() / layout.block_elements * layout.block_bytes;
        return ArraySpec{std::move(name), ElementType::kU8, std::move(dims), split};
      }
    }
    return ArraySpec{std::move(name), ElementType::kF32, std::move(dims), split};
  };
  std::vector<ArraySpec> specs;
  const int64_t p = split.partitions, l = c.n_layers;
  const int64_t qkv = p * (split.q + 2 * split.kv);
  specs.push_back(f32("token_embd", {p * split.vocab, c.d_model}, 0));
  specs.push_back(f32("attn_norm", {l, c.d_model}, -1));
  specs.push_back(f32("wqkv", {l, qkv, c.d_model}, 1));
  if (c.qkv_bias) specs.push_back(f32("bqkv", {l, qkv}, 1));
  specs.push_back(f32("wo", {l, p * split.d, c.q_dim()}, 1));
  specs.push_back(f32("ffn_norm", {l, c.d_model}, -1));
  specs.push_back(f32("wgu", {l, p * 2 * split.ffn, c.d_model}, 1));
  specs.push_back(f32("wdown", {l, c.d_model, p * split.ffn}, 2));
  specs.push_back(f32("output_norm", {c.d_model}, -1));
  if (!c.tied_embeddings) specs.push_back(f32("output", {p * split.vocab, c.d_model}, 0));
  return specs;
}

std::vector<ArraySpec> CacheSpecs(const LlamaConfig& c, int64_t p, int64_t rows,
                                  int64_t cache_len) {
  std::vector<int64_t> dims = {c.n_layers, p, rows, cache_len / p, c.n_kv_heads, c.head_dim};
  return {ArraySpec{"k_cache", ElementType::kF32, dims, 1},
          ArraySpec{"v_cache", ElementType::kF32, dims, 1}};
}

}  // namespace shardrt::llama
