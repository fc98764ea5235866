// shardrt devices: loads the plugin, creates a client and lists its devices.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "shardrt/base/json_writer.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/runtime_setup.h"
#include "shardrt/pjrt/client.h"

namespace shardrt::cli {
namespace {

constexpr FlagDef kFlags[] = {
    kDevicesFlag,
    kPluginFlag,
    {.name = "json", .type = FlagType::kBoolean,
     .description = "print the devices as a JSON array", .default_text = "off"},
};

}  // namespace

constinit const CommandDef kDevicesCommand{
    .name = "devices",
    .usage = "[flags]",
    .summary = "Loads the PJRT plugin with N CPU devices and lists them.",
    .flags = kFlags,
    .run = DevicesCommand};

absl::Status DevicesCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0], "'"));
  }
  SHARDRT_ASSIGN_OR_RETURN(int64_t num_devices,
                           flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(num_devices, flags.Get("plugin"), "off"));
  const pjrt::Client* client = runtime->pjrt_client().get();
  const pjrt::Plugin& plugin = runtime->plugin();
  if (flags.Has("json")) {
    std::string out = "[";
    bool first = true;
    for (const pjrt::Device& d : client->devices()) {
      absl::StrAppend(&out, first ? "" : ",", "\n  {\"id\": ", d.id,
                      ", \"kind\": ", JsonString(d.kind), ", \"process_index\": ", d.process_index,
                      ", \"local_hardware_id\": ", d.local_hardware_id,
                      ", \"addressable\": ", d.addressable ? "true" : "false",
                      ", \"debug_string\": ", JsonString(d.debug_string), "}");
      first = false;
    }
    out += "\n]\n";
    std::fputs(out.c_str(), stdout);
    return absl::OkStatus();
  }
  std::printf("platform %s (%s), PJRT C API %d.%d, %zu devices\n", client->platform_name().c_str(),
              client->platform_version().c_str(), plugin.api_major(), plugin.api_minor(),
              client->devices().size());
  for (const pjrt::Device& d : client->devices()) {
    std::printf("  id=%lld kind=%s process=%lld local_hardware_id=%lld %s\n",
                static_cast<long long>(d.id), d.kind.c_str(),
                static_cast<long long>(d.process_index),
                static_cast<long long>(d.local_hardware_id), d.debug_string.c_str());
  }
  return absl::OkStatus();
}

}  // namespace shardrt::cli
