// Helpers shared by the sharding unit tests.
#pragma once

#include <optional>

#include "gtest/gtest.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/text.h"

namespace shardrt::testing {

// The geometry of `shape` under the sharding `text` (a test failure if either is invalid).
inline ShardGeometry Geometry(Shape shape, const char* text,
                              std::optional<int64_t> devices = std::nullopt) {
  absl::StatusOr<Sharding> s = ParseSharding(text);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<ShardGeometry> g = ShardGeometry::Create(std::move(shape), *s, devices);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

}  // namespace shardrt::testing
