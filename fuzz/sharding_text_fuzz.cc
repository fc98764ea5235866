// libFuzzer target for the sharding text parser. For any input: parsing must not crash; a
// rejected input must get a positioned error; an accepted one must print to canonical text
// that parses back to the same sharding and prints identically, agree with its explicit-list
// and proto forms, and give a sound geometry. Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "shardrt/sharding/geometry.h"
#include "sharding/proto.h"
#include "shardrt/sharding/text.h"
#include "fuzz_util.h"

namespace {

[[noreturn]] void Fail(const char* what, absl::string_view input, const std::string& detail) {
  shardrt::fuzz::Fail("sharding_text_fuzz", what, input, detail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardrt;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Sharding> parsed = ParseSharding(input);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StartsWith(parsed.status().message(), "sharding text at position ")) {
      Fail("error without a position", input, parsed.status().ToString());
    }
    return 0;
  }

  const std::string printed = parsed->ToString();
  absl::StatusOr<Sharding> again = ParseSharding(printed);
  if (!again.ok()) Fail("canonical text does not parse", input, again.status().ToString());
  if (!(*again == *parsed)) Fail("re-parse differs", input, printed + " vs " + again->ToString());
  if (again->ToString() != printed) Fail("print not stable", input, printed);

  absl::StatusOr<Sharding> explicit_form =
      ParseSharding(PrintSharding(*parsed, DeviceListStyle::kExplicit));
  if (!explicit_form.ok() || !(*explicit_form == *parsed)) {
    Fail("explicit list differs", input, printed);
  }

  absl::StatusOr<Sharding> from_proto = DeserializeSharding(SerializeSharding(*parsed));
  if (!from_proto.ok() || !(*from_proto == *parsed)) Fail("proto differs", input, printed);

  // Geometry on a small array of the right rank: every replica group covers it exactly once.
  if (parsed->IsManual() || parsed->data_rank() > 3) return 0;
  int64_t num_devices = 3;  // any count suits a replicated sharding
  if (parsed->IsTiled()) num_devices = *parsed->num_devices();
  if (parsed->IsMaximal()) num_devices = parsed->maximal_device() + 1;
  if (num_devices > 4096) return 0;
  Shape shape(parsed->data_rank(), 5);
  absl::StatusOr<ShardGeometry> g = ShardGeometry::Create(shape, *parsed, num_devices);
  if (!g.ok()) Fail("geometry failed", input, g.status().ToString());
  int64_t covered = 0;
  for (int64_t d = 0; d < g->num_devices(); ++d) {
    if (!g->holds_data(d) || g->replica(d) != 0) continue;
    int64_t volume = 1;
    for (int64_t i = 0; i < g->rank(); ++i) {
      const int64_t extent = g->limit(d)[i] - g->start(d)[i];
      if (extent < 0 || extent > g->shard_shape()[i]) Fail("bad domain", input, printed);
      volume *= extent;
    }
    covered += volume;
  }
  if (covered != g->num_elements()) Fail("replica 0 does not cover the array", input, printed);
  return 0;
}
