#include "llama/quant_ffi.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llama/decode_attention.h"
#include "llama/ffi_parallel.h"
#include "llama/quant_matmul.h"
#include "llama/quants.h"
#include "shardrt/base/status_macros.h"
#include "xla/ffi/api/ffi.h"

namespace shardrt::llama {
namespace {

namespace ffi = xla::ffi;

ffi::Error Invalid(const char* target, const std::string& message) {
  return ffi::Error::InvalidArgument(absl::StrCat(target, ": ", message));
}

// The matrix `w` holds for `type`: rank 2 [n, row_bytes] or 3 [layers, n, row_bytes] with
// `layer` selecting one; `cols` values per row.
absl::StatusOr<QuantMatrix> MatrixOf(int32_t type, const ffi::Buffer<ffi::U8>& w, int64_t layer,
                                     int64_t cols) {
  const auto dims = w.dimensions();
  if (dims.size() != 2 && dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights of rank ", dims.size(), ": expected 2 or 3"));
  }
  const int64_t layers = dims.size() == 3 ? dims[0] : 1;
  if (layer < 0 || layer >= layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, ": expected one of the ", layers, " layers"));
  }
  QuantMatrix m;
  m.type = static_cast<GgufType>(type);
  m.rows = dims[dims.size() - 2];
  m.cols = cols;
  m.row_bytes = dims[dims.size() - 1];
  m.data = reinterpret_cast<const std::byte*>(w.typed_data()) + layer * m.rows * m.row_bytes;
  SHARDRT_RETURN_IF_ERROR(CheckQuantMatrix(m));
  return m;
}

ffi::Error QuantMatmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::U8> w,
                       ffi::BufferR0<ffi::S32> layer, int32_t type, int32_t partitions,
                       int32_t order, ffi::ResultBuffer<ffi::F32> y) {
  if (order != int32_t(MatmulOrder::kFastest) && order != int32_t(MatmulOrder::kPerRow)) {
    return Invalid(kQuantMatmulTarget, absl::StrCat("order ", order, ": expected 0 or 1"));
  }
  const auto xd = x.dimensions();
  if (xd.size() < 1) return Invalid(kQuantMatmulTarget, "x is a scalar: expected [..., k]");
  const int64_t k = xd[xd.size() - 1];
  const int64_t s = k == 0 ? 0 : int64_t(x.element_count()) / k;
  absl::StatusOr<QuantMatrix> m = MatrixOf(type, w, *layer.typed_data(), k);
  if (!m.ok()) return Invalid(kQuantMatmulTarget, std::string(m.status().message()));
  if (int64_t(y->element_count()) != s * m->rows) {
    return Invalid(kQuantMatmulTarget,
                   absl::StrCat("result of ", y->element_count(), " values: expected ", s,
                                " x ", m->rows));
  }
  const KernelIsa isa = BestIsa();
  const float* xs = x.typed_data();
  float* ys = y->typed_data();
  const QuantMatrix matrix = *m;
  // At least 16 rows of W per chunk (whole panels where the product takes panels), at least
  // 64K multiply-adds, at most 8 chunks per thread.
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t work = std::max<int64_t>(1, s * k);
  const int64_t granule = MatmulRowGranule(s, MatmulOrder(order));
  const int64_t units = (matrix.rows + granule - 1) / granule;
  const int64_t min_units = std::max<int64_t>(
      1, std::max<int64_t>(16, (int64_t(1) << 16) / work) / granule);
  const int64_t count = std::clamp<int64_t>(units / min_units, 1, 8 * threads);
  RunChunks(pool, count, partitions, [&](int64_t c) {
    thread_local std::vector<float> scratch;
    if (int64_t(scratch.size()) < MatmulScratchFloats(matrix)) {
      scratch.resize(size_t(MatmulScratchFloats(matrix)));
    }
    const int64_t begin = std::min(matrix.rows, units * c / count * granule);
    const int64_t end = std::min(matrix.rows, units * (c + 1) / count * granule);
    QuantMatmulRows(isa, matrix, xs, s, ys, matrix.rows, begin, end, scratch.data(),
                    MatmulOrder(order));
  });
  return ffi::Error::Success();
}

ffi::Error QuantGather(ffi::Buffer<ffi::U8> w, ffi::BufferR1<ffi::S32> ids, int32_t type,
                       ffi::ResultBuffer<ffi::F32> y) {
  const int64_t s = int64_t(ids.element_count());
  const BlockLayout layout = LayoutOf(static_cast<GgufType>(type));
  const auto wd = w.dimensions();
  if (wd.size() != 2) return Invalid(kQuantGatherTarget, "weights: expected rank 2");
  if (layout.block_bytes == 0 || wd[1] % layout.block_bytes != 0) {
    return Invalid(kQuantGatherTarget,
                   absl::StrCat("rows of ", wd[1], " bytes: not whole blocks of type ",
                                GgufTypeName(uint32_t(type))));
  }
  const int64_t cols = wd[1] / layout.block_bytes * layout.block_elements;
  absl::StatusOr<QuantMatrix> m = MatrixOf(type, w, 0, cols);
  if (!m.ok()) return Invalid(kQuantGatherTarget, std::string(m.status().message()));
  if (int64_t(y->element_count()) != s * cols) {
    return Invalid(kQuantGatherTarget, absl::StrCat("result of ", y->element_count(),
                                                    " values: expected ", s, " x ", cols));
  }
  QuantGatherRows(BestIsa(), *m, ids.typed_data(), s, y->typed_data());
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(kQuantMatmulHandler, QuantMatmul,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::ThreadPool>()
                           .Arg<ffi::Buffer<ffi::F32>>()
                           .Arg<ffi::Buffer<ffi::U8>>()
                           .Arg<ffi::BufferR0<ffi::S32>>()
                           .Attr<int32_t>("type")
                           .Attr<int32_t>("partitions")
                           .Attr<int32_t>("order")
                           .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER(kQuantGatherHandler, QuantGather,
                       ffi::Ffi::Bind()
                           .Arg<ffi::Buffer<ffi::U8>>()
                           .Arg<ffi::BufferR1<ffi::S32>>()
                           .Attr<int32_t>("type")
                           .Ret<ffi::Buffer<ffi::F32>>());

}  // namespace

absl::Status RegisterModelKernels(const Runtime& runtime) {
  SHARDRT_RETURN_IF_ERROR(runtime.RegisterFfiHandler(kQuantMatmulTarget, kQuantMatmulHandler));
  SHARDRT_RETURN_IF_ERROR(runtime.RegisterFfiHandler(kQuantGatherTarget, kQuantGatherHandler));
  return runtime.RegisterFfiHandler(kDecodeAttentionTarget, DecodeAttentionHandler());
}

}  // namespace shardrt::llama
