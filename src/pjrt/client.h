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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pjrt/device.h"
#include "pjrt/plugin.h"

namespace shardrt::pjrt {

struct ClientOptions {
  // Number of CPU devices (the CPU plugin's int64 option `cpu_device_count`). Leave unset for
  // plugins that do not take it (GPU/TPU), which then use their own device count.
  std::optional<int64_t> cpu_device_count;
  // Worker threads of the CPU plugin's pool, which it reads from $PJRT_NPROC at creation (and
  // raises to at least cpu_device_count). Each device's part of a program with collectives
  // holds one of them until every part has arrived, so only threads / devices such programs can
  // run at once: ComputationClient bounds executions in flight accordingly (see
  // cpu_pool_threads()). Unless $PJRT_NPROC is set, Create sets it to this value;
  // 0: max(cores, 2 x cpu_device_count), which keeps two 8-device programs in flight without
  // oversubscribing the cores.
  int64_t cpu_worker_threads = 0;
};

class Client {
 public:
  // Creates a client. Errors: InvalidArgument for cpu_device_count < 1; the plugin's error
  // (code and message kept) if creation fails.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<Client>> Create(
      std::shared_ptr<const Plugin> plugin, const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::shared_ptr<const Plugin>& plugin() const { return plugin_; }
  const PJRT_Api* api() const { return plugin_->api(); }
  PJRT_Client* handle() const { return client_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int64_t process_index() const { return process_index_; }
  // The CPU plugin's worker threads (see ClientOptions::cpu_worker_threads); 0 when unknown
  // (another plugin, or no cpu_device_count given).
  int64_t cpu_pool_threads() const { return cpu_pool_threads_; }
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
  int64_t cpu_pool_threads_ = 0;
  std::vector<Device> devices_;
  std::vector<Device> addressable_;
};

}  // namespace shardrt::pjrt
