#include "cli/model_flags.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"

namespace shardrt::cli {

absl::StatusOr<std::string> ModelPath(const Flags& flags) {
  if (std::optional<std::string> path = flags.Get("model")) return *path;
  if (const char* env = std::getenv("SHARDRT_MODEL"); env != nullptr && *env != '\0') return env;
  return absl::InvalidArgumentError(
      "no model: pass --model FILE.gguf or set SHARDRT_MODEL (scripts/bootstrap.sh fetches "
      "SmolLM2-135M-Instruct to .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf)");
}

absl::StatusOr<llm::WeightFormat> WeightsFlag(const Flags& flags) {
  const std::string value = flags.Get("weights").value_or("native");
  if (value == "native") return llm::WeightFormat::kNative;
  if (value == "f32") return llm::WeightFormat::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("flag --weights: expected native or f32, got '", value.substr(0, 32), "'"));
}

}  // namespace shardrt::cli
