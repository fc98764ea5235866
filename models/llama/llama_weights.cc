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
                                                    const ModelSplit& split,
                                                    const ArraySpec& spec, int64_t d) {
  const std::string& name = spec.name;
  // Device d's `share` rows of tensor `t` (all columns) when `t` has `n` rows: the real ones,
  // then zero rows up to the share.
  auto rows = [&](const std::string& t, int64_t n, int64_t share) -> absl::StatusOr<ShardPiece> {
    SHARDRT_ASSIGN_OR_RETURN(const GgufTensor* tensor, Tensor(file, t));
    const RowRange r = ShareOf(n, share, d);
    return ShardPiece{.tensor = tensor, .row_begin = r.begin, .row_end = r.end, .col_begin = 0,
                      .col_end = tensor->row_length(), .pad_rows = share - (r.end - r.begin)};
  };
  // All of tensor `t` (replicated).
  auto whole = [&](const std::string& t) -> absl::StatusOr<ShardPiece> {
    SHARDRT_ASSIGN_OR_RETURN(const GgufTensor* tensor, Tensor(file, t));
    return ShardPiece{.tensor = tensor, .row_begin = 0, .row_end = 1, .col_begin = 0,
                      .col_end = tensor->row_length()};
  };
  // Device d's `share` columns of every row of tensor `t` (rows x n): the real ones, then
  // zero columns up to the share.
  auto columns = [&](const std::string& t, int64_t n, int64_t share) -> absl::StatusOr<ShardPiece> {
    SHARDRT_ASSIGN_OR_RETURN(const GgufTensor* tensor, Tensor(file, t));
    const RowRange r = ShareOf(n, share, d);
    return ShardPiece{.tensor = tensor, .row_begin = 0, .row_end = tensor->num_rows(),
                      .col_begin = r.begin, .col_end = r.end,
                      .pad_cols = share - (r.end - r.begin)};
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
  if (name == "token_embd" || name == "output") {
    SHARDRT_RETURN_IF_ERROR(add(rows(name + ".weight", c.vocab, split.vocab)));
  } else if (name == "output_norm") {
    SHARDRT_RETURN_IF_ERROR(add(whole("output_norm.weight")));
  } else if (name == "attn_norm" || name == "ffn_norm") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) {
      return add(whole(blk + name + ".weight"));
    }));
  } else if (name == "wqkv") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "attn_q.weight", c.q_dim(), split.q)));
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "attn_k.weight", c.kv_dim(), split.kv)));
      return add(rows(blk + "attn_v.weight", c.kv_dim(), split.kv));
    }));
  } else if (name == "bqkv") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_RETURN_IF_ERROR(add(columns(blk + "attn_q.bias", c.q_dim(), split.q)));
      SHARDRT_RETURN_IF_ERROR(add(columns(blk + "attn_k.bias", c.kv_dim(), split.kv)));
      return add(columns(blk + "attn_v.bias", c.kv_dim(), split.kv));
    }));
  } else if (name == "wo") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) {
      return add(rows(blk + "attn_output.weight", c.d_model, split.d));
    }));
  } else if (name == "wgu") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) -> absl::Status {
      SHARDRT_RETURN_IF_ERROR(add(rows(blk + "ffn_gate.weight", c.ffn, split.ffn)));
      return add(rows(blk + "ffn_up.weight", c.ffn, split.ffn));
    }));
  } else if (name == "wdown") {
    SHARDRT_RETURN_IF_ERROR(per_layer([&](const std::string& blk) {
      return add(columns(blk + "ffn_down.weight", c.ffn, split.ffn));
    }));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown weight ", name));
  }
  return pieces;
}

absl::StatusOr<std::vector<DataPtr>> LoadWeights(const GgufFile& file, const LlamaConfig& c,
                                                 int64_t p, ComputationClient& client) {
  SHARDRT_ASSIGN_OR_RETURN(const ModelSplit split, SplitOf(c, p));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<const pjrt::Device*> devices, client.DefaultDevices(p));
  std::vector<DataPtr> out;
  for (const ArraySpec& spec : WeightSpecs(c, split)) {
    SHARDRT_ASSIGN_OR_RETURN(Sharding sharding, stablehlo::ShardingOf(spec, p));
    SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const DataLayout> layout,
                             client.MakeLayout(ArrayShape{spec.type, spec.dims}, sharding, devices));
    // Device d's shard, piece by piece into the client's host buffer (a replicated weight is
    // made once): dequantized to f32, or, for a u8 spec (native weights), its blocks copied as
    // they are; padding rows and columns are zeros (zero bytes are zero values in every GGUF
    // type: a block of scale 0). The client uploads each shard and frees it as soon as the
    // plugin has it: the host holds at most one shard per pool thread.
    const bool native = spec.type == ElementType::kU8;
    auto produce = [&](size_t d, std::span<std::byte> into) -> absl::Status {
      SHARDRT_ASSIGN_OR_RETURN(std::vector<ShardPiece> pieces,
                               ShardPieces(file, c, split, spec, int64_t(d)));
      size_t at = 0;  // bytes written
      for (const ShardPiece& piece : pieces) {
        const BlockLayout block = LayoutOf(piece.tensor->type);
        // Bytes of `values` values of one row.
        auto bytes = [&](int64_t values) {
          return native ? size_t(values / block.block_elements * block.block_bytes)
                        : size_t(values) * sizeof(float);
        };
        const int64_t real_rows = piece.row_end - piece.row_begin;
        const size_t real_row = bytes(piece.col_end - piece.col_begin);
        const size_t row = real_row + bytes(piece.pad_cols);
        const size_t n = row * size_t(real_rows + piece.pad_rows);
        if (at + n > into.size()) {
          return absl::InternalError(absl::StrCat("weight ", spec.name, ": pieces overflow"));
        }
        std::byte* const base = into.data() + at;
        const std::span<std::byte> real(base, real_row * size_t(real_rows));
        if (real_rows > 0 && piece.col_end > piece.col_begin) {
          SHARDRT_RETURN_IF_ERROR(CheckFiniteValues(file, *piece.tensor, piece.row_begin,
                                                    piece.row_end, piece.col_begin,
                                                    piece.col_end));
          if (native) {
            SHARDRT_RETURN_IF_ERROR(CopyBlocks(file, *piece.tensor, piece.row_begin,
                                               piece.row_end, piece.col_begin, piece.col_end,
                                               absl::MakeSpan(real.data(), real.size())));
          } else {
            SHARDRT_RETURN_IF_ERROR(Dequantize(
                file, *piece.tensor, piece.row_begin, piece.row_end, piece.col_begin,
                piece.col_end,
                absl::MakeSpan(reinterpret_cast<float*>(real.data()), real.size() / sizeof(float))));
          }
        }
        if (row != real_row) {
          // Spread the packed rows to their padded stride, last first (each moves forward, over
          // nothing not yet moved), and zero each row's padding.
          for (int64_t r = real_rows - 1; r >= 0; --r) {
            std::memmove(base + size_t(r) * row, base + size_t(r) * real_row, real_row);
            std::memset(base + size_t(r) * row + real_row, 0, row - real_row);
          }
        }
        std::memset(base + row * size_t(real_rows), 0, row * size_t(piece.pad_rows));
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
