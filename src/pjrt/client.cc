#include "shardrt/pjrt/client.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "pjrt/call.h"

namespace shardrt::pjrt {
namespace {

absl::StatusOr<Device> ReadDevice(const PJRT_Api* api, PJRT_Device* handle) {
  Device d;
  d.handle = handle;
  SHARDRT_PJRT_ARGS(PJRT_Device_GetDescription_Args, get_desc);
  get_desc.device = handle;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Device_GetDescription, &get_desc));
  PJRT_DeviceDescription* desc = get_desc.device_description;

  SHARDRT_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
  id.device_description = desc;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_DeviceDescription_Id, &id));
  d.id = id.id;

  SHARDRT_PJRT_ARGS(PJRT_DeviceDescription_ProcessIndex_Args, process);
  process.device_description = desc;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_DeviceDescription_ProcessIndex, &process));
  d.process_index = process.process_index;

  SHARDRT_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kind);
  kind.device_description = desc;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_DeviceDescription_Kind, &kind));
  d.kind.assign(kind.device_kind, kind.device_kind_size);

  SHARDRT_PJRT_ARGS(PJRT_DeviceDescription_DebugString_Args, debug);
  debug.device_description = desc;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_DeviceDescription_DebugString, &debug));
  d.debug_string.assign(debug.debug_string, debug.debug_string_size);

  SHARDRT_PJRT_ARGS(PJRT_DeviceDescription_ToString_Args, to_string);
  to_string.device_description = desc;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_DeviceDescription_ToString, &to_string));
  d.to_string.assign(to_string.to_string, to_string.to_string_size);

  SHARDRT_PJRT_ARGS(PJRT_Device_IsAddressable_Args, addressable);
  addressable.device = handle;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Device_IsAddressable, &addressable));
  d.addressable = addressable.is_addressable;
  if (d.addressable) {
    SHARDRT_PJRT_ARGS(PJRT_Device_LocalHardwareId_Args, local);
    local.device = handle;
    SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Device_LocalHardwareId, &local));
    d.local_hardware_id = local.local_hardware_id;
  }
  return d;
}

// The PJRT form of `values`; the strings and lists stay owned by `values`.
std::vector<PJRT_NamedValue> ToPjrt(const std::vector<NamedValue>& values) {
  std::vector<PJRT_NamedValue> out;
  out.reserve(values.size());
  for (const NamedValue& v : values) {
    SHARDRT_PJRT_ARGS(PJRT_NamedValue, p);
    p.name = v.name.data();
    p.name_size = v.name.size();
    p.value_size = 1;
    if (const auto* s = std::get_if<std::string>(&v.value)) {
      p.type = PJRT_NamedValue_kString;
      p.string_value = s->data();
      p.value_size = s->size();
    } else if (const auto* i = std::get_if<int64_t>(&v.value)) {
      p.type = PJRT_NamedValue_kInt64;
      p.int64_value = *i;
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&v.value)) {
      p.type = PJRT_NamedValue_kInt64List;
      p.int64_array_value = l->data();
      p.value_size = l->size();
    } else if (const auto* f = std::get_if<float>(&v.value)) {
      p.type = PJRT_NamedValue_kFloat;
      p.float_value = *f;
    } else {
      p.type = PJRT_NamedValue_kBool;
      p.bool_value = std::get<bool>(v.value);
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Client>> Client::Create(std::shared_ptr<const Plugin> plugin,
                                                       const ClientOptions& options) {
  if (plugin == nullptr) return absl::InvalidArgumentError("Client::Create: no plugin");
  const PJRT_Api* api = plugin->api();
  std::vector<PJRT_NamedValue> values = ToPjrt(options.create_options);
  SHARDRT_PJRT_ARGS(PJRT_Client_Create_Args, create);
  create.create_options = values.data();
  create.num_options = values.size();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_Create, &create));

  std::shared_ptr<Client> client(new Client());
  client->plugin_ = std::move(plugin);
  client->client_ = create.client;

  SHARDRT_PJRT_ARGS(PJRT_Client_PlatformName_Args, name);
  name.client = client->client_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_PlatformName, &name));
  client->platform_name_.assign(name.platform_name, name.platform_name_size);

  SHARDRT_PJRT_ARGS(PJRT_Client_PlatformVersion_Args, version);
  version.client = client->client_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_PlatformVersion, &version));
  client->platform_version_.assign(version.platform_version, version.platform_version_size);

  SHARDRT_PJRT_ARGS(PJRT_Client_ProcessIndex_Args, process);
  process.client = client->client_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_ProcessIndex, &process));
  client->process_index_ = process.process_index;

  SHARDRT_PJRT_ARGS(PJRT_Client_Devices_Args, devices);
  devices.client = client->client_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_Devices, &devices));
  for (size_t i = 0; i < devices.num_devices; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(Device d, ReadDevice(api, devices.devices[i]));
    client->devices_.push_back(d);
  }
  SHARDRT_PJRT_ARGS(PJRT_Client_AddressableDevices_Args, addressable);
  addressable.client = client->client_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_AddressableDevices, &addressable));
  for (size_t i = 0; i < addressable.num_addressable_devices; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(Device d, ReadDevice(api, addressable.addressable_devices[i]));
    client->addressable_.push_back(d);
  }
  return client;
}

Client::~Client() {
  if (client_ == nullptr) return;
  SHARDRT_PJRT_ARGS(PJRT_Client_Destroy_Args, args);
  args.client = client_;
  SHARDRT_PJRT_DESTROY(api(), PJRT_Client_Destroy, &args);
}

absl::StatusOr<const Device*> Client::DeviceById(int64_t id) const {
  for (const Device& d : addressable_) {
    if (d.id == id) return &d;
  }
  return absl::NotFoundError(absl::StrCat("no addressable device with id ", id, " (the client has ",
                                          addressable_.size(), " addressable devices)"));
}

const Device* Client::DeviceByHandle(const PJRT_Device* handle) const {
  for (const Device& d : addressable_) {
    if (d.handle == handle) return &d;
  }
  return nullptr;
}

}  // namespace shardrt::pjrt
