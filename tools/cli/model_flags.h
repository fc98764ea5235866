// The flags of the commands that run a model (generate, serve): which GGUF file, and how its
// weights are held.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "shardrt/llm/weight_format.h"

namespace shardrt::cli {

inline constexpr FlagDef kModelFlag{.name = "model", .value_name = "FILE.gguf",
                                    .description = "the Llama-family GGUF model (llama, qwen2)",
                                    .default_text = "$SHARDRT_MODEL"};
inline constexpr FlagDef kWeightsFlag{
    .name = "weights", .value_name = "native|f32",
    .description = "the weight matrices as their GGUF blocks (quantized kernels) or "
                   "dequantized to f32 at load",
    .default_text = "native"};

// The model file: --model, else $SHARDRT_MODEL. Error: InvalidArgument when neither is set.
[[nodiscard]] absl::StatusOr<std::string> ModelPath(const Flags& flags);

// --weights: native (the default) or f32. Error: InvalidArgument naming the value.
[[nodiscard]] absl::StatusOr<llm::WeightFormat> WeightsFlag(const Flags& flags);

}  // namespace shardrt::cli
