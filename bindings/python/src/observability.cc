// Metrics (PyTorch/XLA-style metrics and counters) and trace recording (_Trace).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "common.h"
#include "register.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// _Trace: records shardrt's spans between start() and stop(); write() saves a Chrome trace.
class PyTrace {
 public:
  void Start() { Check(recorder_.Start()); }
  void Stop() { recorder_.Stop(); }
  void Write(const std::string& path) const { Check(recorder_.WriteJson(path)); }
  std::string Json() const { return recorder_.ToJson(); }
  int64_t num_events() const { return recorder_.num_events(); }
  bool recording() const { return recorder_.recording(); }

 private:
  TraceRecorder recorder_;
};

}  // namespace

void RegisterObservability(nb::module_& m) {
  m.def("metrics_json", [] { return GlobalMetrics().JsonReport(); },
        "The metrics registry as JSON (PyTorch/XLA-style metrics and counters).");
  m.def("metrics_report", [] { return GlobalMetrics().TextReport(); },
        "The metrics registry as PyTorch/XLA's text report.");
  m.def("metrics_reset", [] { GlobalMetrics().Reset(); }, "Clears every metric and counter.");

  nb::class_<PyTrace>(m, "_Trace")
      .def(nb::init<>())
      .def("start", &PyTrace::Start)
      .def("stop", &PyTrace::Stop)
      .def("write", &PyTrace::Write, "path"_a)
      .def("json", &PyTrace::Json)
      .def_prop_ro("num_events", &PyTrace::num_events)
      .def_prop_ro("recording", &PyTrace::recording);
}

}  // namespace shardrt::python
