// Text generation over llm::Session (libshardrt_llm): _LlmSession, _Generation and
// _open_session, which shardrt/llm.py wraps as shardrt.llm.Session.
//
// A session holds the runtime it was opened on (it lives as long as the session). A
// generation runs Session::Generate on a thread of its own (Generation, generation.h): the
// Python side waits for its pieces or its result with the GIL released, in slices of
// kPollInterval between which it checks for signals (Ctrl-C stops the generation and raises
// KeyboardInterrupt). Dropping or stopping a generation stops it and joins its thread.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "generation.h"
#include "objects.h"
#include "register.h"
#include "shardrt/llm/session.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// How long a wait holds without checking for signals.
constexpr std::chrono::milliseconds kPollInterval(100);

// A session and the runtime it runs on (declared first: destroyed after the session).
struct PySession {
  RuntimePtr runtime;
  std::unique_ptr<llm::Session> session;
  ~PySession() {
    nb::gil_scoped_release release;  // frees the weights and programs on the devices
    session.reset();
  }
};
using SessionPtr = std::shared_ptr<PySession>;

// A generation in flight or ended, and the session it runs on (kept alive meanwhile).
struct PyGeneration {
  SessionPtr session;
  std::unique_ptr<Generation> generation;
  ~PyGeneration() {
    nb::gil_scoped_release release;  // stops the generation and joins its thread
    generation.reset();
  }
};

// `text` as a Python str, bytes that are not UTF-8 replaced by U+FFFD.
nb::str Utf8(std::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

// The weight format named `name` ("native", "f32"); ValueError otherwise.
llm::WeightFormat WeightsNamed(const std::string& name) {
  if (name == "native") return llm::WeightFormat::kNative;
  if (name == "f32") return llm::WeightFormat::kF32;
  throw nb::value_error(
      absl::StrCat("Session: weights must be 'native' or 'f32', got '", name, "'").c_str());
}

// _open_session: opens `model` on `runtime`'s first `devices` devices (0: all of them).
SessionPtr OpenSession(RuntimePtr runtime, const std::string& model, int64_t devices,
                       int64_t context_length, const std::string& weights) {
  llm::SessionOptions options;
  options.model_path = model;
  options.devices = devices;
  options.context_length = context_length;
  options.weights = WeightsNamed(weights);
  absl::StatusOr<std::unique_ptr<llm::Session>> session =
      WithoutGil([&] { return llm::Session::Open(*runtime->runtime, options); });
  auto out = std::make_shared<PySession>();
  out->runtime = std::move(runtime);
  out->session = Value(std::move(session));
  return out;
}

// _LlmSession.info: ModelInfo as a dict.
nb::dict InfoDict(const PySession& s) {
  const llm::ModelInfo& info = s.session->info();
  nb::dict d;
  d["architecture"] = info.architecture;
  d["name"] = info.name;
  d["vocab"] = info.vocab;
  d["context"] = info.context;
  d["layers"] = info.layers;
  d["d_model"] = info.d_model;
  d["heads"] = info.heads;
  d["kv_heads"] = info.kv_heads;
  return d;
}

// _LlmSession.tokenize: text to token ids.
std::vector<int32_t> Tokenize(const PySession& s, const std::string& text) {
  return Value(WithoutGil([&] { return s.session->Tokenize(text); }));
}

// _LlmSession.detokenize: token ids to text (bytes that are not UTF-8 replaced by U+FFFD).
nb::str Detokenize(const PySession& s, const std::vector<int32_t>& tokens) {
  return Utf8(Value(WithoutGil([&] { return s.session->Detokenize(tokens); })));
}

// The request _LlmSession.generate's arguments describe: `prompt` (text), else
// `prompt_tokens`.
llm::GenerateRequest RequestOf(std::optional<std::string> prompt,
                               std::vector<int32_t> prompt_tokens, bool chat,
                               std::optional<std::string> system, int64_t max_tokens,
                               double temperature, double top_p, int64_t top_k, uint64_t seed,
                               std::vector<std::string> stop) {
  llm::GenerateRequest request;
  if (prompt) request.prompt = *std::move(prompt);
  request.prompt_tokens = std::move(prompt_tokens);
  request.format = chat ? llm::PromptFormat::kChat : llm::PromptFormat::kRaw;
  if (system) request.system = *std::move(system);
  request.max_tokens = max_tokens;
  request.sampling = {.temperature = temperature, .top_p = top_p, .top_k = top_k, .seed = seed};
  request.stop.strings = std::move(stop);
  return request;
}

// _LlmSession.generate: checks the request's prompt and sampling (ValueError naming what is
// wrong), then starts it on a thread of its own. With `stream`, the generation queues its
// pieces for _Generation.next.
std::unique_ptr<PyGeneration> StartGeneration(const SessionPtr& s,
                                              std::optional<std::string> prompt,
                                              std::vector<int32_t> prompt_tokens, bool chat,
                                              std::optional<std::string> system,
                                              int64_t max_tokens, double temperature, double top_p,
                                              int64_t top_k, uint64_t seed,
                                              std::vector<std::string> stop, bool stream) {
  llm::GenerateRequest request =
      RequestOf(std::move(prompt), std::move(prompt_tokens), chat, std::move(system), max_tokens,
                temperature, top_p, top_k, seed, std::move(stop));
  auto out = std::make_unique<PyGeneration>();
  out->session = s;
  Check(WithoutGil([&]() -> absl::Status {
    if (absl::Status sampling = llm::ValidateSampling(request.sampling); !sampling.ok()) {
      return sampling;
    }
    absl::StatusOr<std::vector<int32_t>> tokens = s->session->PromptTokens(request);
    if (!tokens.ok()) return tokens.status();
    out->generation = std::make_unique<Generation>(*s->session, std::move(request), stream);
    return absl::OkStatus();
  }));
  return out;
}

// Calls `wait` (which waits at most kPollInterval) with the GIL released until it returns
// true; between calls, checks for signals: a pending one (KeyboardInterrupt) stops the
// generation and raises.
template <typename Wait>
void WaitInterruptibly(PyGeneration& g, Wait wait) {
  while (!WithoutGil(wait)) {
    if (PyErr_CheckSignals() != 0) {
      nb::python_error error;  // takes the pending exception
      WithoutGil([&] { g.generation->Stop(); });
      throw error;
    }
  }
}

// The generation's result as a dict (text, tokens, prompt_tokens, finish_reason, stats); its
// error as an exception.
nb::dict ResultDict(PyGeneration& g) {
  const absl::StatusOr<llm::GenerateResult>& result =
      WithoutGil([&]() -> const absl::StatusOr<llm::GenerateResult>& {
        return g.generation->Result();
      });
  Check(result.status());
  const llm::GenerateStats& stats = result->stats;
  nb::dict s;
  s["prompt_tokens"] = stats.prompt_tokens;
  s["generated_tokens"] = stats.generated_tokens;
  s["prefill_seconds"] = stats.prefill_seconds;
  s["decode_seconds"] = stats.decode_seconds;
  s["prefill_tokens_per_second"] = stats.prefill_tokens_per_second();
  s["decode_tokens_per_second"] = stats.decode_tokens_per_second();
  nb::dict d;
  d["text"] = Utf8(result->text);
  d["tokens"] = result->tokens;
  d["prompt_tokens"] = result->prompt_tokens;
  d["finish_reason"] = std::string(llm::FinishReasonName(result->finish_reason));
  d["stats"] = s;
  return d;
}

// _Generation.next: the next piece of text, or None once the generation has ended (raising
// its error, if it failed).
std::optional<nb::str> NextPiece(PyGeneration& g) {
  Generation::Step step;
  WaitInterruptibly(g, [&] {
    step = g.generation->Next(kPollInterval);
    return step.kind != Generation::Step::kTimeout;
  });
  if (step.kind == Generation::Step::kPiece) return Utf8(step.piece);
  ResultDict(g);  // raises the generation's error
  return std::nullopt;
}

// _Generation.result: waits for the end; the result as a dict, or the generation's error.
nb::dict WaitResult(PyGeneration& g) {
  WaitInterruptibly(g, [&] { return g.generation->WaitDone(kPollInterval); });
  return ResultDict(g);
}

// _Generation.stop: ends the generation early and joins its thread.
void StopGeneration(PyGeneration& g) {
  WithoutGil([&] { g.generation->Stop(); });
}

}  // namespace

void RegisterLlm(nb::module_& m) {
  nb::class_<PySession>(m, "_LlmSession")
      .def_prop_ro("info", &InfoDict)
      .def_prop_ro("devices", [](const PySession& s) { return s.session->devices(); })
      .def_prop_ro("context_length",
                   [](const PySession& s) { return s.session->context_length(); })
      .def("tokenize", &Tokenize, "text"_a)
      .def("detokenize", &Detokenize, "tokens"_a)
      .def("generate", &StartGeneration, "prompt"_a.none(), "prompt_tokens"_a, "chat"_a,
           "system"_a.none(), "max_tokens"_a, "temperature"_a, "top_p"_a, "top_k"_a, "seed"_a,
           "stop"_a, "stream"_a);
  nb::class_<PyGeneration>(m, "_Generation")
      .def("next", &NextPiece)
      .def("result", &WaitResult)
      .def("stop", &StopGeneration);
  m.def("_open_session", &OpenSession, "runtime"_a, "model"_a, "devices"_a, "context_length"_a,
        "weights"_a);
}

}  // namespace shardrt::python
