#include "llama/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llama/attention_partial.h"
#include "llama/ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace shardrt::llama {
namespace {

namespace ffi = xla::ffi;

std::string DimsText(ffi::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims.begin(), dims.end(), ", "), "]");
}

ffi::Error DecodeAttention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> k,
                           ffi::Buffer<ffi::F32> v, ffi::Buffer<ffi::F32> k_cache,
                           ffi::Buffer<ffi::F32> v_cache, ffi::BufferR0<ffi::S32> layer_buf,
                           ffi::BufferR1<ffi::S32> positions_buf, ffi::BufferR0<ffi::S32> pid_buf,
                           int32_t partitions, ffi::ResultBuffer<ffi::F32> out) {
  auto invalid = [](const std::string& message) {
    return ffi::Error::InvalidArgument(absl::StrCat(kDecodeAttentionTarget, ": ", message));
  };
  const auto qd = q.dimensions(), kd = k.dimensions(), cd = k_cache.dimensions();
  if (qd.size() != 3 || kd.size() != 3 || kd[0] != qd[0] || cd.size() != 6 || cd[1] != 1 ||
      cd[2] < qd[0] || v.dimensions() != kd || v_cache.dimensions() != cd ||
      int64_t(positions_buf.element_count()) != qd[0]) {
    return invalid(absl::StrCat("q ", DimsText(qd), ", k ", DimsText(kd), ", v ",
                                DimsText(v.dimensions()), ", caches ", DimsText(cd), " and ",
                                DimsText(v_cache.dimensions()), ", ",
                                positions_buf.element_count(),
                                " positions: expected [B, heads, hd], [B, kv, hd] twice, "
                                "[layers, 1, R >= B, slots, kv, hd] twice and B positions"));
  }
  const int64_t batch = qd[0], heads = qd[1], hd = qd[2], kv = kd[1], layers = cd[0],
                rows = cd[2], slots = cd[3];
  if (kd[2] != hd || cd[4] != kv || cd[5] != hd || kv < 1 || heads % kv != 0) {
    return invalid(absl::StrCat("q ", DimsText(qd), ", k ", DimsText(kd), ", caches ",
                                DimsText(cd), ": head dims or key/value heads differ"));
  }
  const int64_t g = heads / kv;
  const auto od = out->dimensions();
  if (od.size() != 4 || od[0] != kv || od[1] != batch || od[2] != g || od[3] != hd + 2) {
    return invalid(absl::StrCat("result ", DimsText(od), ": expected [", kv, ", ", batch, ", ",
                                g, ", ", hd + 2, "]"));
  }
  const int64_t layer = *layer_buf.typed_data(), pid = *pid_buf.typed_data(), p = partitions;
  const int32_t* positions = positions_buf.typed_data();
  if (p < 1 || pid < 0 || pid >= p || layer < 0 || layer >= layers) {
    return invalid(absl::StrCat("layer ", layer, " of ", layers, ", device ", pid, " of ", p,
                                ": out of range"));
  }
  int64_t most = 0;  // keys of the longest row on this device
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t position = positions[b];
    if (position < -1 || position >= slots * p) {
      return invalid(absl::StrCat("position ", position, " of token ", b, ": outside the ",
                                  slots * p, " positions of the cache"));
    }
    most = std::max(most, position > pid ? (position - pid + p - 1) / p : 0);
  }
  const int64_t stride = kv * hd;  // between slots
  const int64_t row_stride = slots * stride;
  const int64_t layer_offset = layer * rows * row_stride;
  const float scale = 1.0f / std::sqrt(float(hd));
  // Item t: token t / kv, key/value head t % kv.
  auto run = [&](int64_t t) {
    const int64_t b = t / kv, h = t % kv, position = positions[b];
    if (position < 0) {  // an idle row: a finite nothing
      for (int64_t i = 0; i < g; ++i) {
        float* o = out->typed_data() + ((h * batch + b) * g + i) * (hd + 2);
        std::fill(o, o + hd + 2, 0.0f);
        o[hd + 1] = 1.0f;
      }
      return;
    }
    // This device's positions before the token: pid, pid + P, ... < position.
    const int64_t count = position > pid ? (position - pid + p - 1) / p : 0;
    const bool owner = position % p == pid;
    thread_local std::vector<float> scores;
    const int64_t row = layer_offset + b * row_stride + h * hd;
    // The group's query heads h g .. h g + g - 1 are consecutive in q and in the result.
    const float* self_k = owner ? k.typed_data() + (b * kv + h) * hd : nullptr;
    const float* self_v = owner ? v.typed_data() + (b * kv + h) * hd : nullptr;
    AttentionHeadsPartial(q.typed_data() + (b * heads + h * g) * hd, g, hd, scale,
                          k_cache.typed_data() + row, v_cache.typed_data() + row, stride, count,
                          self_k, self_v, out->typed_data() + (h * batch + b) * g * (hd + 2),
                          scores);
  };
  // Split over the tokens' key/value heads once the keys are many (each reads count x hd x 2).
  if (batch * most * hd * g >= (int64_t(1) << 15)) {
    RunChunks(pool, batch * kv, p, run);
  } else {
    for (int64_t t = 0; t < batch * kv; ++t) run(t);
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kDecodeAttentionHandler, DecodeAttention,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::ThreadPool>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::BufferR0<ffi::S32>>()
                           .Arg<ffi::BufferR1<ffi::S32>>()
                           .Arg<ffi::BufferR0<ffi::S32>>()
                           .Attr<int32_t>("partitions")
                           .Ret<ffi::Buffer<ffi::F32>>());

}  // namespace

XLA_FFI_Handler* DecodeAttentionHandler() { return kDecodeAttentionHandler; }

}  // namespace shardrt::llama
