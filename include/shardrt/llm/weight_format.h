// WeightFormat: how a model's weight matrices live on the devices.
#pragma once

namespace shardrt::llm {

enum class WeightFormat {
  // As stored in the GGUF file (Q4_1, Q8_0, ... blocks, u8 arrays), multiplied by shardrt's
  // quantized kernels (custom calls through the plugin's FFI extension): the least memory and
  // the fastest decode. Results differ from kF32 only by the order of the sums.
  kNative,
  // Dequantized to f32 at load and multiplied by XLA's own dot: the reference to check against.
  kF32,
};

}  // namespace shardrt::llm
