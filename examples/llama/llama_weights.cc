#include "llama/llama_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "llama/quants.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/thread_pool.h"
#include "shardrt/data/data.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/sharding/text.h"

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

// Floats in pages of their own (an anonymous mapping), returned to the system when destroyed:
// a freed shard does not stay in the C library's heap, on top of the weights on the devices.
class PageBuffer {
 public:
  static absl::StatusOr<PageBuffer> Create(int64_t n) {
    const size_t bytes = std::max<size_t>(size_t(n) * sizeof(float), 1);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", bytes, " bytes for a weight shard: ", std::strerror(errno)));
    }
    return PageBuffer(static_cast<float*>(p), n);
  }
  PageBuffer(PageBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PageBuffer& operator=(PageBuffer&&) = delete;
  ~PageBuffer() {
    if (data_ != nullptr) ::munmap(data_, std::max<size_t>(size_t(size_) * sizeof(float), 1));
  }
  float* data() const { return data_; }
  absl::Span<float> span() const { return absl::MakeSpan(data_, size_t(size_)); }

 private:
  PageBuffer(float* data, int64_t size) : data_(data), size_(size) {}
  float* data_;
  int64_t size_;
};

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
    SHARDRT_ASSIGN_OR_RETURN(Sharding sharding, ParseSharding(ShardingText(spec, p)));
    SHARDRT_ASSIGN_OR_RETURN(
        std::shared_ptr<const DataLayout> layout,
        client.MakeLayout(ArrayShape{ElementType::kF32, spec.dims}, sharding, devices));
    const std::vector<int64_t> local = ShardDims(spec, p);
    int64_t shard_elements = 1;
    for (int64_t dim : local) shard_elements *= dim;
    // Device d's shard, dequantized piece by piece.
    auto dequantize = [&](int64_t d) -> absl::StatusOr<PageBuffer> {
      SHARDRT_ASSIGN_OR_RETURN(std::vector<ShardPiece> pieces, ShardPieces(file, c, spec, p, d));
      SHARDRT_ASSIGN_OR_RETURN(PageBuffer shard, PageBuffer::Create(shard_elements));
      int64_t at = 0;
      for (const ShardPiece& piece : pieces) {
        const int64_t n = (piece.row_end - piece.row_begin) * (piece.col_end - piece.col_begin);
        if (at + n > shard_elements) {
          return absl::InternalError(absl::StrCat("weight ", spec.name, ": pieces overflow"));
        }
        SHARDRT_RETURN_IF_ERROR(Dequantize(file, *piece.tensor, piece.row_begin, piece.row_end,
                                           piece.col_begin, piece.col_end,
                                           shard.span().subspan(size_t(at), size_t(n))));
        at += n;
      }
      if (at != shard_elements) {
        return absl::InternalError(absl::StrCat("weight ", spec.name, ": pieces hold ", at,
                                                " values, the shard ", shard_elements));
      }
      return shard;
    };
    // A replicated weight is the same on every device: dequantize it once. A split one is
    // dequantized and uploaded device by device, each host shard unmapped once its upload is
    // done, so the host holds at most one shard per pool thread.
    std::optional<PageBuffer> replicated;
    if (spec.split_dim < 0) {
      SHARDRT_ASSIGN_OR_RETURN(PageBuffer shard, dequantize(0));
      replicated.emplace(std::move(shard));
    }
    std::vector<pjrt::Buffer> buffers(p);
    SHARDRT_RETURN_IF_ERROR(ParallelFor(
        client.pool(), p, ParallelCost{.per_item_ns = 2.0 * double(shard_elements)},
        [&](int64_t begin, int64_t end) -> absl::Status {
          for (int64_t d = begin; d < end; ++d) {
            std::optional<PageBuffer> own;
            if (!replicated.has_value()) {
              SHARDRT_ASSIGN_OR_RETURN(PageBuffer shard, dequantize(d));
              own.emplace(std::move(shard));
            }
            const float* shard = (own.has_value() ? *own : *replicated).data();
            SHARDRT_ASSIGN_OR_RETURN(
                pjrt::HostUpload upload,
                pjrt::Buffer::FromHost(*client.pjrt_client(), shard, ElementType::kF32, local,
                                       *devices[d],
                                       pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes));
            SHARDRT_RETURN_IF_ERROR(upload.done_with_host_buffer.Await());
            buffers[d] = std::move(upload.buffer);
          }
          return absl::OkStatus();
        }));
    // This weight's tensors have been read: their pages of the file can go.
    file.ReleasePages();
    SHARDRT_ASSIGN_OR_RETURN(DataPtr data,
                             Data::Create(client.pjrt_client(), layout, std::move(buffers)));
    out.push_back(std::move(data));
  }
  return out;
}

}  // namespace shardrt::llama
