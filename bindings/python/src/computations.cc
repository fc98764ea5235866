// shardrt.Computation: compiled SPMD programs, their calls (blocking and scheduled), and
// compilation (_compile).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "objects.h"
#include "register.h"
#include "shardrt/program/program_text.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// shardrt.Computation: a compiled program and the runtime it runs on. Thread-safe.
class PyComputation {
 public:
  PyComputation(RuntimePtr runtime, ComputationPtr c)
      : runtime_(std::move(runtime)), computation_(std::move(c)) {}

  const Computation& get() const { return *computation_; }

  // Runs the program on `args` (Arrays) and waits for the launch; donate: see NonDonatable;
  // reshard: reshard arguments with another sharding first (a copy).
  nb::tuple Call(nb::args args, nb::handle donate, bool reshard) const {
    std::vector<DataPtr> arguments = Arguments(args);
    ExecuteReplicatedOptions options;
    options.non_donatable_input_indices = NonDonatable(donate);
    if (reshard) options.resharding = ArgumentResharding::kReshardCopy;
    return Wrap(Value(WithoutGil([&] {
      return runtime_->runtime->client().ExecuteReplicated(*computation_, arguments, options);
    })));
  }

  // Schedules the call on the runtime's executor; returns placeholder Arrays.
  nb::tuple CallAsync(nb::args args, nb::handle donate) const {
    std::vector<DataPtr> arguments = Arguments(args);
    ScheduleOptions options;
    options.execute.non_donatable_input_indices = NonDonatable(donate);
    return Wrap(Value(WithoutGil([&] {
      return runtime_->runtime->executor().Schedule(computation_, std::move(arguments), options);
    })));
  }

  // The shardings of the parameters, or of the outputs.
  std::vector<PySharding> Shardings(bool outputs) const {
    std::vector<PySharding> out;
    for (const DataLayout* layout : Layouts(outputs)) out.emplace_back(layout->sharding);
    return out;
  }

  // (type name, global shape) of each parameter, or of each output.
  std::vector<std::pair<std::string, nb::tuple>> Shapes(bool outputs) const {
    std::vector<std::pair<std::string, nb::tuple>> out;
    for (const DataLayout* layout : Layouts(outputs)) {
      out.emplace_back(std::string(ElementTypeName(layout->global.type)),
                       ToTuple(layout->global.dims));
    }
    return out;
  }

 private:
  // Which donated parameters to keep for this call: `donate` is None/True (donate what the
  // program declares), False (donate nothing) or a collection of argument indices that may be
  // donated (the program's other donated parameters are kept).
  std::vector<int64_t> NonDonatable(nb::handle donate) const {
    std::vector<int64_t> keep;
    const std::vector<int64_t>& donated = computation_->donated_parameters();
    if (donate.is_none()) return keep;
    if (nb::isinstance<nb::bool_>(donate)) {
      if (!nb::cast<bool>(donate)) keep = donated;
      return keep;
    }
    std::vector<int64_t> allowed;
    for (nb::handle h : nb::iter(donate)) {
      int64_t i = 0;
      if (!nb::try_cast<int64_t>(h, i) || i < 0 ||
          i >= static_cast<int64_t>(computation_->num_parameters())) {
        throw nb::value_error(absl::StrCat(computation_->name(),
                                           ": donate holds ", nb::repr(h).c_str(),
                                           ", not an argument index in [0, ",
                                           computation_->num_parameters(), ")")
                                  .c_str());
      }
      allowed.push_back(i);
    }
    for (int64_t p : donated) {
      if (std::find(allowed.begin(), allowed.end(), p) == allowed.end()) keep.push_back(p);
    }
    return keep;
  }

  // The data of each argument; ValueError for a deleted Array. An argument that is no Array is
  // handed to shardrt._convert_argument (Python: a jax.Array becomes an Array with the
  // parameter's sharding on the parameter's devices); TypeError when it converts nothing.
  std::vector<DataPtr> Arguments(const nb::args& args) const {
    std::vector<DataPtr> out;
    out.reserve(args.size());
    nb::object convert;  // looked up at the first argument that is no Array
    for (size_t i = 0; i < args.size(); ++i) {
      PyArray* a = nullptr;
      if ((nb::try_cast<PyArray*>(args[i], a) && a != nullptr) ||
          i >= computation_->num_parameters()) {
        // (too many arguments: the library's count check names the call's error)
        out.push_back(ArrayOf(args[i], computation_->name().c_str(), "argument", i).data());
        continue;
      }
      if (!convert.is_valid()) convert = nb::module_::import_("shardrt").attr("_convert_argument");
      const DataLayout& layout = *computation_->parameter_layout(i);
      std::vector<int64_t> device_ids;
      for (const pjrt::Device* d : layout.devices) device_ids.push_back(d->id);
      nb::object converted = convert(nb::cast(runtime_), PySharding(layout.sharding),
                                     device_ids, args[i]);
      const nb::handle value = converted.is_none() ? args[i] : nb::handle(converted);
      out.push_back(ArrayOf(value, computation_->name().c_str(), "argument", i).data());
    }
    return out;
  }

  // The outputs as a tuple of new Arrays.
  nb::tuple Wrap(std::vector<DataPtr> outputs) const {
    nb::tuple result = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(outputs.size())));
    for (size_t i = 0; i < outputs.size(); ++i) {
      nb::object o = WrapArray(runtime_, std::move(outputs[i]));
      PyTuple_SET_ITEM(result.ptr(), static_cast<Py_ssize_t>(i), o.release().ptr());
    }
    return result;
  }

  // The layouts of the parameters, or of the outputs.
  std::vector<const DataLayout*> Layouts(bool outputs) const {
    std::vector<const DataLayout*> out;
    const size_t n = outputs ? computation_->num_outputs() : computation_->num_parameters();
    for (size_t i = 0; i < n; ++i) {
      out.push_back(outputs ? computation_->output_layout(i).get()
                            : computation_->parameter_layout(i).get());
    }
    return out;
  }

  RuntimePtr runtime_;
  ComputationPtr computation_;
};

// _compile: compiles `program` (MLIR text or bytecode) for `num_partitions` devices.
nb::object Compile(const RuntimePtr& rt, nb::bytes program, const std::string& name,
                   int64_t num_partitions) {
  CompileRequest request;
  request.name = name;
  request.program.assign(program.c_str(), program.size());
  request.options.num_partitions = num_partitions;
  return nb::cast(PyComputation(
      rt, Value(WithoutGil([&] { return rt->runtime->client().Compile(request); }))));
}

}  // namespace

void RegisterComputations(nb::module_& m) {
  nb::class_<PyComputation>(m, "Computation",
                            "A compiled SPMD program. Call it with shardrt.Arrays (a jax.Array "
                            "argument is put first, shard by shard, with the parameter's "
                            "sharding); it returns a tuple of Arrays. Thread-safe.")
      .def("__call__", &PyComputation::Call, "args"_a, nb::kw_only(), "donate"_a = nb::none(),
           "reshard"_a = false,
           "Runs on all its devices (one PJRT launch), GIL released. donate: None/True donates "
           "what the program declares, False nothing, or a collection of argument indices. "
           "reshard=True reshards arguments with another sharding first (a copy).")
      .def("call_async", &PyComputation::CallAsync, "args"_a, nb::kw_only(),
           "donate"_a = nb::none(),
           "Schedules the call on the runtime's executor and returns placeholder Arrays at "
           "once; arguments may be placeholders. Errors arrive through the outputs.")
      .def_prop_ro("name", [](const PyComputation& c) { return c.get().name(); })
      .def_prop_ro("num_devices", [](const PyComputation& c) { return c.get().num_devices(); })
      .def_prop_ro("num_parameters", [](const PyComputation& c) { return c.get().num_parameters(); })
      .def_prop_ro("num_outputs", [](const PyComputation& c) { return c.get().num_outputs(); })
      .def_prop_ro("donated_parameters",
                   [](const PyComputation& c) { return c.get().donated_parameters(); })
      .def_prop_ro("parameter_shardings", [](const PyComputation& c) { return c.Shardings(false); })
      .def_prop_ro("output_shardings", [](const PyComputation& c) { return c.Shardings(true); })
      .def_prop_ro("parameter_shapes", [](const PyComputation& c) { return c.Shapes(false); },
                   "(type name, global shape) of each parameter.")
      .def_prop_ro("output_shapes", [](const PyComputation& c) { return c.Shapes(true); });
  m.def("_compile", &Compile, "runtime"_a, "program"_a, "name"_a, "num_partitions"_a);
  m.def(
      "_declared_partitions",
      [](nb::bytes program) -> std::optional<int64_t> {
        // A program the reader cannot read declares nothing here: compiling it reports why.
        absl::StatusOr<std::optional<int64_t>> declared =
            DeclaredPartitions(absl::string_view(program.c_str(), program.size()));
        return declared.ok() ? *declared : std::nullopt;
      },
      "program"_a,
      "The mhlo.num_partitions a StableHLO text program declares (the library's program "
      "reader); None when it declares none, is MLIR bytecode or cannot be read.");
}

}  // namespace shardrt::python
