// Client: the unique owner of a PJRT_Client, created from a Plugin.
//
// Created once per set of devices and shared (std::shared_ptr): everything created from it
// (buffers, executables) must be destroyed before it; the layers above keep a shared_ptr to the
// client in every object that holds device state. Device information is read once, at
// creation. Thread-safety: all methods are thread-safe (PJRT clients are internally
// synchronized); the object itself is immutable after Create.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/device.h"
#include "shardrt/pjrt/named_value.h"
#include "shardrt/pjrt/plugin.h"

namespace shardrt::pjrt {

struct SHARDRT_EXPORT ClientOptions {
  // Passed to PJRT_Client_Create as they are. Which names and types are understood is the
  // plugin's business (unknown names are ignored by some plugins and rejected by others).
  std::vector<NamedValue> create_options;
};

class SHARDRT_EXPORT Client {
 public:
  // Creates a client of `plugin` with `options`, and reads its platform and devices once.
  // Errors: InvalidArgument for a null plugin; the plugin's error (code and message kept) if
  // creation fails, e.g. for an option it rejects.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<Client>> Create(
      std::shared_ptr<const Plugin> plugin, const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The plugin, its function table, and the client handle (borrowed; valid while this lives).
  const std::shared_ptr<const Plugin>& plugin() const { return plugin_; }
  const PJRT_Api* api() const { return plugin_->api(); }
  PJRT_Client* handle() const { return client_; }
  // What the plugin reports about itself, e.g. "cpu", "cuda".
  const std::string& platform_name() const { return platform_name_; }
  // The plugin's platform version string, and this process's index among the client's.
  const std::string& platform_version() const { return platform_version_; }
  int64_t process_index() const { return process_index_; }
  // All devices, in the plugin's order.
  absl::Span<const Device> devices() const { return devices_; }
  // The devices this process can address, in the plugin's order.
  absl::Span<const Device> addressable_devices() const { return addressable_; }
  // The addressable device with global id `id`. Error: NotFound naming the id.
  [[nodiscard]] absl::StatusOr<const Device*> DeviceById(int64_t id) const;
  // The addressable device whose handle is `handle`, or null.
  const Device* DeviceByHandle(const PJRT_Device* handle) const;

 private:
  Client() = default;
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  int64_t process_index_ = 0;
  std::vector<Device> devices_;
  std::vector<Device> addressable_;
};

}  // namespace shardrt::pjrt
