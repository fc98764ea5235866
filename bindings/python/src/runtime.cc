// _Runtime: a PJRT plugin, its client and the runtime over it (shardrt.Runtime wraps it in
// Python), and _create_runtime.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "objects.h"
#include "register.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// The plugin log level named `name` (None: the library's default).
std::optional<pjrt::PluginLogLevel> PluginLogLevelNamed(const std::optional<std::string>& name) {
  if (!name.has_value()) return std::nullopt;
  if (*name == "info") return pjrt::PluginLogLevel::kInfo;
  if (*name == "warning") return pjrt::PluginLogLevel::kWarning;
  if (*name == "error") return pjrt::PluginLogLevel::kError;
  if (*name == "plugin") return pjrt::PluginLogLevel::kUnchanged;
  throw nb::value_error(
      ("Runtime: plugin_log must be 'info', 'warning', 'error' or 'plugin', got '" + *name + "'")
          .c_str());
}

// _create_runtime: loads `plugin` and makes a runtime over `devices` of its devices (0: all).
RuntimePtr CreateRuntime(int64_t devices, const std::string& plugin, int host_threads,
                         std::optional<std::string> compile_cache, int64_t max_in_flight,
                         const std::optional<std::string>& plugin_log) {
  RuntimeOptions options;
  options.plugin_log_level = PluginLogLevelNamed(plugin_log);
  options.devices = devices;
  options.plugin = plugin;
  options.host_threads = host_threads;
  if (max_in_flight > 0) options.executor.max_in_flight = max_in_flight;
  if (compile_cache) {
    options.compile_cache.directory = *compile_cache;  // "" : off
    options.compile_cache_env = CompileCacheEnv::kIgnore;
  }
  absl::StatusOr<std::unique_ptr<Runtime>> runtime =
      WithoutGil([&] { return Runtime::Create(options); });
  auto out = std::make_shared<PyRuntime>();
  out->runtime = Value(std::move(runtime));
  return out;
}

std::vector<int64_t> DeviceIds(const PyRuntime& r) {
  std::vector<int64_t> ids;
  for (const pjrt::Device* d : r.runtime->devices()) ids.push_back(d->id);
  return ids;
}

std::vector<std::string> DeviceKinds(const PyRuntime& r) {
  std::vector<std::string> kinds;
  for (const pjrt::Device* d : r.runtime->devices()) kinds.push_back(d->kind);
  return kinds;
}

// _Runtime.synchronize: waits for everything scheduled; raises the first error since the last.
void Synchronize(const PyRuntime& r) {
  Check(WithoutGil([&] { return r.runtime->executor().Synchronize(); }));
}

nb::dict ExecutorStatsDict(const PyRuntime& r) {
  ExecutorStats s = r.runtime->executor().stats();
  nb::dict d;
  d["scheduled"] = s.scheduled;
  d["dispatched"] = s.dispatched;
  d["failed"] = s.failed;
  d["in_flight"] = s.in_flight;
  d["device_pending"] = s.device_pending;
  return d;
}

// _Runtime.register_ffi_handler: `handler` is a PyCapsule holding an XLA_FFI_Handler* (as
// XLA_FFI_DEFINE_HANDLER's symbol, wrapped like jax.ffi.pycapsule does) or its address as an int.
// The library holding the handler must stay loaded for the rest of the process.
void RegisterFfiHandler(const PyRuntime& r, const std::string& target, nb::handle handler,
                        const std::string& platform) {
  void* address = nullptr;
  if (PyCapsule_CheckExact(handler.ptr())) {
    address = PyCapsule_GetPointer(handler.ptr(), PyCapsule_GetName(handler.ptr()));
    if (address == nullptr) throw nb::python_error();
  } else if (PyLong_Check(handler.ptr())) {
    address = PyLong_AsVoidPtr(handler.ptr());
    if (address == nullptr && PyErr_Occurred()) throw nb::python_error();
  } else {
    throw nb::type_error("register_ffi_handler: handler must be a PyCapsule or an int address");
  }
  pjrt::FfiHandlerOptions options;
  options.platform = platform;
  auto* fn = reinterpret_cast<XLA_FFI_Handler*>(address);
  Check(WithoutGil([&] { return r.runtime->RegisterFfiHandler(target, fn, options); }));
}

}  // namespace

void RegisterRuntime(nb::module_& m) {
  nb::class_<PyRuntime>(m, "_Runtime")
      .def_prop_ro("device_ids", &DeviceIds)
      .def_prop_ro("device_kinds", &DeviceKinds)
      .def_prop_ro("platform", [](const PyRuntime& r) { return r.runtime->platform_name(); })
      .def_prop_ro("plugin_path", [](const PyRuntime& r) { return r.runtime->plugin().path(); })
      .def_prop_ro("plugin_threads", [](const PyRuntime& r) { return r.runtime->plugin_threads(); })
      .def_prop_ro("host_threads", [](const PyRuntime& r) { return r.runtime->pool().num_threads(); })
      .def_prop_ro("plugin_log_applied",
                   [](const PyRuntime& r) {
                     return r.runtime->plugin().log_control() == pjrt::PluginLogControl::kApplied;
                   })
      .def_prop_ro("has_compile_cache",
                   [](const PyRuntime& r) { return r.runtime->client().has_persistent_cache(); })
      .def("register_ffi_handler", &RegisterFfiHandler, "target"_a, "handler"_a, "platform"_a)
      .def("synchronize", &Synchronize)
      .def("executor_stats", &ExecutorStatsDict);
  m.def("_create_runtime", &CreateRuntime, "devices"_a, "plugin"_a, "host_threads"_a,
        "compile_cache"_a.none(), "max_in_flight"_a, "plugin_log"_a.none() = nb::none());
}

}  // namespace shardrt::python
