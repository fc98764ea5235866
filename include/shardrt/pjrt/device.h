// Device: what shardrt knows about one PJRT device, read once when the client is created.
#pragma once

#include <cstdint>
#include <string>

#include "shardrt/base/export.h"
#include "shardrt/pjrt/opaque.h"

namespace shardrt::pjrt {

// Plain data; the handle is borrowed from the Client and valid for the Client's lifetime.
struct SHARDRT_EXPORT Device {
  PJRT_Device* handle = nullptr;
  int64_t id = 0;                 // global device id
  int64_t process_index = 0;
  int64_t local_hardware_id = -1;
  std::string kind;               // e.g. "cpu"
  std::string debug_string;       // e.g. "TFRT_CPU_0"
  std::string to_string;          // e.g. "CpuDevice(id=0)"
  bool addressable = true;
};

}  // namespace shardrt::pjrt
