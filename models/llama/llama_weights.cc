#include "llama/llama_weights.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "llama/quants.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {
namespace {

absl::StatusOr<const GgufTensor*> Tensor(const GgufFile& file, const std::string& name) {
  const GgufTensor* t = file.Find(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file ", file.path(), ": tensor ", name, " is missing"));
  }
  return t;
}

}  // namespace

absl::StatusOr<std::vector<ShardPiece>> ShardPieces(const GgufFile& file, const LlamaConfig& c,
                                                    const ArraySpec& spec, int64_t p,
                                                    int64_t d) {
  const std::string& name = spec.name;
  // Rows [d * n / P, (d + 1) * n / P) of tensor `t` (all columns), or all of it.
  auto rows = [&](const std::string& t, int64_t n, bool split) -> absl::StatusOr<ShardPiece> {
    SHARDRT_ASSIGN_OR_RETURN(const GgufTensor* tensor, Tensor(file, t));
    const int64_t begin = split ? d * n / p : 0, end = split ? (d + 1) * n / p : n;
    return ShardPiece{tensor, begin, end, 0, tensor->row_length()};
  };
  std::vector<ShardPiece> pieces;
  auto add = [&](absl::StatusOr<ShardPiece> piece) -> absl::Status {
    SHARDRT_RETURN_IF_ERROR(piece.status());
    pieces.push_back(*piece);
    return absl::OkStatus();
  };
  // A stacked weight's shard is its per-layer pieces, layer after layer.
  auto per_layer = [&](const auto& add_layer) -> absl::Status {
    for (int64_t i = 0; i < c.n_layers; ++i) {
      SHARDRT_RETURN_IF_ERROR(add_layer(absl::StrCat("blk.", i, ".")));
    }
    return absl::OkStatus();
  };
  if (name == "token_embd") {
    SHARDRT_RETURN_IF_ERROR(add(rows("token_embd.weight", c.vocab, true)));
  } else if (name == "output_norm") {
    SHARDRT_RETURN_IF_ERROR(add(rows("output_norm.weight", 1, false)));
  } else if (name == "attn_norm" || name == "ffn_norm") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) {
      return add(rows(blk + name + ".weight", 1, false));
    }));
  } else if (name == "wqkv") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "attn_q.weight", c.q_dim(), true)));
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "attn_k.weight", c.kv_dim(), true)));
      return add(rows(blk + "attn_v.weight", c.kv_dim(), true));
    }));
  } else if (name == "wo") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) {
      return add(rows(blk + "attn_output.weight", c.d_model, true));
    }));
  } else if (name == "wgu") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "ffn_gate.weight", c.ffn, true)));
      return add(rows(blk + "ffn_up.weight", c.ffn, true));
    }));
  } else if (name == "wdown") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_ASSIGN_OR_RETURN(const GgufTensor* t, Tensor(file, blk + "ffn_down.weight"));
      pieces.push_back(ShardPiece{t, 0, c.d_model, d * c.ffn / p, (d + 1) * c.ffn / p});
      return absl::OkStatus();
    }));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown weight ", name));
  }
  return pieces;
}

absl::StatusOr<std::vector<DataPtr>> LoadWeights(const GgufFile& file, const LlamaConfig& c,
                                                 int64_t p, ComputationClient& client) {
  SHARDRT_RETURN_IF_ERROR(CheckPartitions(c, p));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<const pjrt::Device*> devices, client.DefaultDevices(p));
  std::vector<DataPtr> out;
  for (const ArraySpec& spec : WeightSpecs(c)) {
    SHARDRT_ASSIGN_OR_RETURN(Sharding sharding, stablehlo::ShardingOf(spec, p));
    SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const DataLayout> layout,
                             client.MakeLayout(ArrayShape{spec.type, spec.dims}, sharding, devices));
    // Device d's shard, piece by piece into the client's host buffer (a replicated weight is
    // made once): dequantized to f32, or, for a u8 spec (native weights), its blocks copied as
    // they are. The client uploads each shard and frees it as soon as the plugin has it: the
    // host holds at most one shard per pool thread.
    const bool native = spec.type == ElementType::kU8;
    auto produce = [&](size_t d, std::span<std::byte> into) -> absl::Status {
      SHARDRT_ASSIGN_OR_RETURN(std::vector<ShardPiece> pieces,
                               ShardPieces(file, c, spec, p, int64_t(d)));
      size_t at = 0;  // bytes written
      for (const ShardPiece& piece : pieces) {
        const BlockLayout block = LayoutOf(piece.tensor->type);
        const int64_t values =
            (piece.row_end - piece.row_begin) * (piece.col_end - piece.col_begin);
        const size_t n = native ? size_t(values / block.block_elements * block.block_bytes)
                                : size_t(values) * sizeof(float);
        if (at + n > into.size()) {
          return absl::InternalError(absl::StrCat("weight ", spec.name, ": pieces overflow"));
        }
        if (native) {
          SHARDRT_RETURN_IF_ERROR(CopyBlocks(file, *piece.tensor, piece.row_begin,
                                             piece.row_end, piece.col_begin, piece.col_end,
                                             absl::MakeSpan(into.data() + at, n)));
        } else {
          SHARDRT_RETURN_IF_ERROR(Dequantize(
              file, *piece.tensor, piece.row_begin, piece.row_end, piece.col_begin,
              piece.col_end,
              absl::MakeSpan(reinterpret_cast<float*>(into.data() + at), n / sizeof(float))));
        }
        at += n;
      }
      if (at != into.size()) {
        return absl::InternalError(absl::StrCat("weight ", spec.name, ": pieces hold ", at,
                                                " bytes, the shard ", into.size()));
      }
      return absl::OkStatus();
    };
    // About 0.5 ns per f32 byte to dequantize; a copy of blocks is cheaper.
    SHARDRT_ASSIGN_OR_RETURN(DataPtr data,
                             client.AssembleFromShards(layout, produce, native ? 0.1 : 0.5));
    // This weight's tensors have been read: their pages of the file can go.
    file.ReleasePages();
    out.push_back(std::move(data));
  }
  return out;
}

}  // namespace shardrt::llama
