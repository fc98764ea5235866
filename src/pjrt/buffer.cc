#include "shardrt/pjrt/buffer.h"

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "pjrt/call.h"

namespace shardrt::pjrt {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    api_ = std::exchange(other.api_, nullptr);
    buffer_ = std::exchange(other.buffer_, nullptr);
  }
  return *this;
}

void Buffer::Reset() {
  if (buffer_ == nullptr) return;
  SHARDRT_PJRT_ARGS(PJRT_Buffer_Destroy_Args, args);
  args.buffer = buffer_;
  SHARDRT_PJRT_DESTROY(api_, PJRT_Buffer_Destroy, &args);
  buffer_ = nullptr;
}

absl::StatusOr<HostUpload> Buffer::FromHost(const Client& client, const void* data,
                                            ElementType type, absl::Span<const int64_t> dims,
                                            const Device& device,
                                            HostBufferSemantics semantics) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Buffer::FromHost: dimension ", i, " is negative (", dims[i], ")"));
    }
  }
  SHARDRT_ASSIGN_OR_RETURN(PJRT_Buffer_Type pjrt_type, internal::ToPjrtType(type));
  const PJRT_Api* api = client.api();
  SHARDRT_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
  args.client = client.handle();
  args.data = data;
  args.type = pjrt_type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  switch (semantics) {
    case HostBufferSemantics::kImmutableOnlyDuringCall:
      args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
      break;
    case HostBufferSemantics::kImmutableUntilTransferCompletes:
      args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
      break;
    case HostBufferSemantics::kImmutableZeroCopy:
      args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableZeroCopy;
      break;
  }
  args.device = device.handle;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_BufferFromHostBuffer, &args));
  return HostUpload{Buffer(api, args.buffer), Event(api, args.done_with_host_buffer)};
}

absl::StatusOr<size_t> Buffer::HostSizeInBytes() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_ToHostBuffer, &args));
  return args.dst_size;
}

absl::StatusOr<Event> Buffer::ToHost(void* dst, size_t dst_size) const {
  SHARDRT_ASSIGN_OR_RETURN(size_t needed, HostSizeInBytes());
  if (dst_size < needed) {
    return absl::InvalidArgumentError(absl::StrCat("Buffer::ToHost: destination has ", dst_size,
                                                   " bytes, the buffer needs ", needed));
  }
  SHARDRT_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = dst_size;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_ToHostBuffer, &args));
  return Event(api_, args.event);
}

absl::StatusOr<ElementType> Buffer::QueryElementType() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_ElementType_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_ElementType, &args));
  return internal::FromPjrtType(args.type);
}

absl::StatusOr<std::vector<int64_t>> Buffer::QueryDimensions() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_Dimensions_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_Dimensions, &args));
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

absl::StatusOr<size_t> Buffer::OnDeviceSizeInBytes() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_OnDeviceSizeInBytes, &args));
  return args.on_device_size_in_bytes;
}

absl::StatusOr<PJRT_Device*> Buffer::QueryDevice() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_Device_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_Device, &args));
  return args.device;
}

absl::StatusOr<Event> Buffer::ReadyEvent() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_ReadyEvent, &args));
  return Event(api_, args.event);
}

bool Buffer::IsDeleted() const {
  if (buffer_ == nullptr) return true;
  SHARDRT_PJRT_ARGS(PJRT_Buffer_IsDeleted_Args, args);
  args.buffer = buffer_;
  if (!SHARDRT_PJRT_CALL(api_, PJRT_Buffer_IsDeleted, &args).ok()) return true;
  return args.is_deleted;
}

absl::StatusOr<void*> Buffer::HostPointer() const {
  if (buffer_ == nullptr) return absl::FailedPreconditionError("HostPointer: empty buffer");
  SHARDRT_PJRT_ARGS(PJRT_Buffer_GetMemoryLayout_Args, layout_args);
  layout_args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_GetMemoryLayout, &layout_args));
  const PJRT_Buffer_MemoryLayout& layout = layout_args.layout;
  bool row_major = layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled && layout.tiled.num_tiles == 0;
  if (row_major) {
    const size_t rank = layout.tiled.minor_to_major_size;
    for (size_t i = 0; i < rank; ++i) {
      // Row-major: the most minor physical dim is the last logical one.
      row_major &= layout.tiled.minor_to_major[i] == static_cast<int64_t>(rank - 1 - i);
    }
  }
  if (!row_major) {
    return absl::FailedPreconditionError(
        "HostPointer: the buffer is not laid out dense row-major on its device");
  }
  if (api_->PJRT_Buffer_UnsafePointer == nullptr) {
    return absl::FailedPreconditionError("HostPointer: the plugin gives no buffer pointers");
  }
  SHARDRT_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args, args);
  args.buffer = buffer_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api_, PJRT_Buffer_UnsafePointer, &args));
  return reinterpret_cast<void*>(args.buffer_pointer);
}

absl::Status Buffer::AcquireExternalReference() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, args);
  args.buffer = buffer_;
  return SHARDRT_PJRT_CALL(api_, PJRT_Buffer_IncreaseExternalReferenceCount, &args);
}

absl::Status Buffer::ReleaseExternalReference() const {
  SHARDRT_PJRT_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, args);
  args.buffer = buffer_;
  return SHARDRT_PJRT_CALL(api_, PJRT_Buffer_DecreaseExternalReferenceCount, &args);
}

}  // namespace shardrt::pjrt
