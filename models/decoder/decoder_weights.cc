#include "decoder/decoder_weights.h"

#include <cmath>

#include "shardrt/base/status_macros.h"

namespace shardrt::decoder {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of the array name, to give every array its own stream.
uint64_t NameHash(absl::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

class Stream {
 public:
  Stream(uint64_t seed, absl::string_view name) : state_(seed) {
    state_ = SplitMix64(state_) ^ NameHash(name);
  }
  // Uniform in [-1, 1) with 24 random bits: exactly representable as a float.
  double Uniform() { return double(SplitMix64(state_) >> 40) / double(1 << 23) - 1.0; }
  uint64_t Next() { return SplitMix64(state_); }

 private:
  uint64_t state_;
};

bool EndsWith(absl::string_view s, absl::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const WeightArray* DecoderWeights::Find(absl::string_view name) const {
  for (const WeightArray& a : arrays) {
    if (a.spec.name == name) return &a;
  }
  return nullptr;
}

absl::StatusOr<DecoderWeights> GenerateWeights(const DecoderConfig& config, uint64_t seed) {
  SHARDRT_RETURN_IF_ERROR(ValidateConfig(config));
  DecoderWeights weights;
  weights.seed = seed;
  for (ArraySpec& spec : WeightSpecs(config)) {
    Stream stream(seed, spec.name);
    SHARDRT_ASSIGN_OR_RETURN(const int64_t count, spec.num_elements());
    std::vector<float> values(count);
    const absl::string_view name = spec.name;
    if (name == "embed") {
      for (float& v : values) v = float(stream.Uniform());
    } else if (name == "pos_embed") {
      for (float& v : values) v = float(0.1 * stream.Uniform());
    } else if (EndsWith(name, "norm")) {
      for (float& v : values) v = float(1.0 + 0.1 * stream.Uniform());
    } else {
      const double scale = 1.0 / std::sqrt(double(spec.dims[0]));
      for (float& v : values) v = float(scale * stream.Uniform());
    }
    weights.arrays.push_back(WeightArray{std::move(spec), std::move(values)});
  }
  return weights;
}

std::vector<int32_t> GeneratePrompt(const DecoderConfig& config, uint64_t seed) {
  Stream stream(seed, "prompt");
  std::vector<int32_t> prompt(config.prompt_len);
  for (int32_t& t : prompt) t = int32_t(stream.Next() % uint64_t(config.vocab));
  return prompt;
}

std::vector<float> ExtractShard(absl::Span<const float> values, const ArraySpec& spec,
                                int64_t partition, int64_t num_partitions) {
  if (spec.split_dim < 0 || num_partitions == 1) return {values.begin(), values.end()};
  // View the array as [outer, n, inner] around the split dimension.
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < spec.split_dim; ++i) outer *= spec.dims[i];
  for (size_t i = spec.split_dim + 1; i < spec.dims.size(); ++i) inner *= spec.dims[i];
  const int64_t n = spec.dims[spec.split_dim];
  const int64_t begin = partition * n / num_partitions, end = (partition + 1) * n / num_partitions;
  std::vector<float> shard;
  shard.reserve(outer * (end - begin) * inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = values.data() + (o * n + begin) * inner;
    shard.insert(shard.end(), row, row + (end - begin) * inner);
  }
  return shard;
}

}  // namespace shardrt::decoder
