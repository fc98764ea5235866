// Buffer: the unique owner of one PJRT_Buffer (an array on one device).
//
// A Buffer does not keep its client alive: whoever holds Buffers (sharded data, tests) also
// holds the Client's shared_ptr and destroys the buffers first. Thread-safety: const methods may
// be called concurrently (PJRT buffers are internally synchronized); moving or destroying needs
// exclusive access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/pjrt/event.h"
#include "shardrt/pjrt/opaque.h"

namespace shardrt::pjrt {

// How long the runtime may read the host memory passed to Buffer::FromHost.
enum class HostBufferSemantics {
  kImmutableOnlyDuringCall,          // copied before FromHost returns
  kImmutableUntilTransferCompletes,  // keep the memory until the `done` event fires
  kImmutableZeroCopy,                // the buffer may alias the memory for its whole life
};

class Buffer;

// What Buffer::FromHost returns: the new buffer and the event that says when the host memory
// may be reused or freed (always await or keep it per the semantics used).
struct HostUpload;

class SHARDRT_EXPORT Buffer {
 public:
  Buffer() = default;
  // Adopts `buffer` (may be null). `api` must be the plugin's table.
  Buffer(const PJRT_Api* api, PJRT_Buffer* buffer) : api_(api), buffer_(buffer) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  // Destroys what this buffer owned, then takes `other`'s.
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  // Starts copying a dense row-major host array to `device`. Errors: InvalidArgument for a
  // negative dimension or an unsupported type; the plugin's error otherwise.
  [[nodiscard]] static absl::StatusOr<HostUpload> FromHost(const Client& client, const void* data,
                                                           ElementType type,
                                                           absl::Span<const int64_t> dims,
                                                           const Device& device,
                                                           HostBufferSemantics semantics);

  // Starts copying the whole buffer into `dst` (dense row-major, `dst_size` bytes at least
  // OnDeviceSizeInBytes for dense arrays); the returned event fires when done.
  // Error: InvalidArgument if dst_size is too small; the plugin's error otherwise.
  [[nodiscard]] absl::StatusOr<Event> ToHost(void* dst, size_t dst_size) const;
  // Bytes ToHost needs.
  [[nodiscard]] absl::StatusOr<size_t> HostSizeInBytes() const;

  // Queries the plugin (not for hot paths: callers should cache shape and type). Errors: the
  // plugin's. The device handle is borrowed from the client.
  [[nodiscard]] absl::StatusOr<ElementType> QueryElementType() const;
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> QueryDimensions() const;
  [[nodiscard]] absl::StatusOr<size_t> OnDeviceSizeInBytes() const;
  [[nodiscard]] absl::StatusOr<PJRT_Device*> QueryDevice() const;
  // An event that fires when the buffer's value is computed (or failed).
  [[nodiscard]] absl::StatusOr<Event> ReadyEvent() const;
  // True when the buffer was deleted or donated to an execution.
  bool IsDeleted() const;

  // Where the buffer's bytes are, when the caller's process can read them in place: on the CPU
  // plugin a device buffer is host memory. Only for dense row-major buffers (the default
  // layout): the pointer addresses exactly the bytes ToHost would copy. The memory belongs to
  // the buffer: valid while the buffer lives and is not donated; reading it before ReadyEvent
  // fires reads garbage. Errors: FailedPrecondition for a buffer that is not laid out row-major
  // or whose plugin gives no pointer; the plugin's.
  [[nodiscard]] absl::StatusOr<void*> HostPointer() const;
  // Counts a user of HostPointer's memory outside PJRT (a DLPack view): while the count is
  // above zero the plugin keeps that memory for this buffer (the CPU plugin's executions copy
  // a donated argument instead of reusing it). Every Acquire needs one Release, while the
  // buffer lives. Errors: the plugin's.
  [[nodiscard]] absl::Status AcquireExternalReference() const;
  [[nodiscard]] absl::Status ReleaseExternalReference() const;

  // The handle (borrowed; null when empty).
  PJRT_Buffer* handle() const { return buffer_; }
  bool empty() const { return buffer_ == nullptr; }
  // Gives up ownership of the handle.
  PJRT_Buffer* Release() { return std::exchange(buffer_, nullptr); }
  // Destroys the buffer now.
  void Reset();

 private:
  const PJRT_Api* api_ = nullptr;
  PJRT_Buffer* buffer_ = nullptr;
};

struct SHARDRT_EXPORT HostUpload {
  Buffer buffer;
  Event done_with_host_buffer;
};

}  // namespace shardrt::pjrt
