// libFuzzer target for reading serialized OpSharding bytes. For any input: no crash; an
// accepted sharding must write back to bytes that read as the same sharding, and agree with
// its canonical text. Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "sharding/proto.h"
#include "shardrt/sharding/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardrt;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Sharding> read = DeserializeSharding(input);
  if (!read.ok()) {
    if (read.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const std::string text = read->ToString();
  absl::StatusOr<Sharding> again = DeserializeSharding(SerializeSharding(*read));
  absl::StatusOr<Sharding> parsed = ParseSharding(text);
  if (!again.ok() || !(*again == *read) || !parsed.ok() || !(*parsed == *read)) {
    std::fprintf(stderr, "sharding_proto_fuzz: round trip differs for %s\n", text.c_str());
    std::abort();
  }
  return 0;
}
