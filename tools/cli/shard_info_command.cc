// shardrt shard-info --shape D0,D1,... --sharding TEXT [--devices N] [--json]
//
// Prints where each device's data lies for one (shape, sharding): the canonical sharding
// text, the padded shard shape and, per device holding data (ascending id), its replica index
// and exact index domain [start, limit). --json prints the same as one JSON object; the
// default is a table plus, for 1-D and 2-D tilings, a drawing of which device holds which tile.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/json_writer.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/sharding.h"
#include "shardrt/base/limits.h"
#include "shardrt/sharding/text.h"

namespace shardrt::cli {
namespace {

// "8,7" or "[8,7]"; "" or "[]" is a scalar. At most limits::kMaxRank dimensions.
absl::StatusOr<Shape> ParseShapeFlag(absl::string_view full_text) {
  // Messages quote at most the first 60 characters.
  const std::string text = full_text.size() > 60
                               ? absl::StrCat(full_text.substr(0, 60), "...")
                               : std::string(full_text);
  absl::string_view body = absl::StripAsciiWhitespace(full_text);
  if (absl::ConsumePrefix(&body, "[") && !absl::ConsumeSuffix(&body, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': missing ']'"));
  }
  body = absl::StripAsciiWhitespace(body);
  Shape shape;
  if (body.empty()) return shape;
  for (absl::string_view part : absl::StrSplit(body, ',')) {
    if (static_cast<int64_t>(shape.size()) >= limits::kMaxRank) {
      return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': more than ",
                                                     limits::kMaxRank, " dimensions"));
    }
    int64_t dim = 0;
    if (!absl::SimpleAtoi(part, &dim)) {
      return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': dimension ",
                                                     shape.size(), " ('",
                                                     absl::StripAsciiWhitespace(part),
                                                     "') is not an int64 integer"));
    }
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--shape '", text, "': dimension ",
                                                     shape.size(), " is negative (", dim, ")"));
    }
    shape.push_back(dim);
  }
  return shape;
}

std::string List(std::span<const int64_t> values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

std::string Json(const ShardGeometry& g, const Sharding& sharding) {
  std::string out = absl::StrCat("{\"shape\": ", List(g.shape()),
                                 ", \"sharding\": ", JsonString(sharding.ToString()),
                                 ", \"num_devices\": ", g.num_devices(),
                                 ", \"shard_shape\": ", List(g.shard_shape()), ", \"shards\": [");
  bool first = true;
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    if (!g.holds_data(d)) continue;
    absl::StrAppend(&out, first ? "" : ", ", "{\"device\": ", d, ", \"replica\": ", g.replica(d),
                    ", \"start\": ", List(g.start(d)), ", \"limit\": ", List(g.limit(d)), "}");
    first = false;
  }
  return out + "]}\n";
}

// Left-aligned columns separated by two spaces.
std::string Columns(const std::vector<std::vector<std::string>>& rows, absl::string_view indent) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Range(int64_t start, int64_t limit) { return absl::StrCat("[", start, ",", limit, ")"); }

// The devices holding tile t, e.g. "0" or "0,2"; long lists are cut short.
std::string Holders(const ShardGeometry& g, int64_t t) {
  std::span<const int64_t> devices = g.tile_devices(t);
  constexpr size_t kShown = 4;
  if (devices.size() <= kShown) return absl::StrJoin(devices, ",");
  return absl::StrCat(absl::StrJoin(devices.first(kShown), ","), ",+",
                      devices.size() - kShown);
}

// For a 1-D or 2-D tiling: a grid of tiles, each cell naming its devices.
std::string Drawing(const ShardGeometry& g, const Sharding& sharding) {
  if (!sharding.IsTiled() || g.rank() < 1 || g.rank() > 2) return "";
  std::span<const int64_t> grid = sharding.data_tile_dims();
  const int64_t rows = g.rank() == 2 ? grid[0] : 1;
  const int64_t cols = g.rank() == 2 ? grid[1] : grid[0];
  if (rows > 32 || cols > 16) return "\n(too many tiles to draw)\n";
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header;
  if (g.rank() == 2) header.push_back("");
  const int64_t col_dim = g.rank() - 1;
  for (int64_t j = 0; j < cols; ++j) {
    header.push_back(Range(g.tile_start(j)[col_dim], g.tile_limit(j)[col_dim]));
  }
  table.push_back(header);
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<std::string> row;
    if (g.rank() == 2) row.push_back(Range(g.tile_start(i * cols)[0], g.tile_limit(i * cols)[0]));
    for (int64_t j = 0; j < cols; ++j) row.push_back(Holders(g, i * cols + j));
    table.push_back(row);
  }
  const char* title = g.rank() == 2
                          ? "\ntiles (dim 0 down, dim 1 across; each cell lists its devices):\n"
                          : "\ntiles (dim 0 across; each cell lists its devices):\n";
  return absl::StrCat(title, Columns(table, "  "));
}

std::string Table(const ShardGeometry& g, const Sharding& sharding) {
  std::string out = Columns({{"shape:", List(g.shape())},
                             {"sharding:", sharding.ToString()},
                             {"devices:", absl::StrCat(g.num_devices())},
                             {"shard shape:", absl::StrCat(List(g.shard_shape()),
                                                           " (padded; every device buffer)")},
                             {"tiles:", absl::StrCat(g.num_tiles(), ", each on ",
                                                     g.num_replicas(),
                                                     g.num_replicas() == 1
                                                         ? " device"
                                                         : " devices (its replicas)")}},
                            "");
  std::vector<std::vector<std::string>> rows = {{"device", "replica", "start", "limit", "shape"}};
  int64_t without_data = 0;
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    if (!g.holds_data(d)) {
      ++without_data;
      continue;
    }
    rows.push_back({absl::StrCat(d), absl::StrCat(g.replica(d)), List(g.start(d)),
                    List(g.limit(d)), List(g.exact_shape(d))});
  }
  absl::StrAppend(&out, "\n", Columns(rows, ""));
  if (without_data > 0) {
    absl::StrAppend(&out, "(", without_data, without_data == 1 ? " device holds" : " devices hold",
                    " no data)\n");
  }
  return out + Drawing(g, sharding);
}

constexpr FlagDef kFlags[] = {
    {.name = "shape", .value_name = "D0,D1,...",
     .description = "the array's global shape, e.g. 8,7 or [8,7] ('' or [] for a scalar); required"},
    {.name = "sharding", .value_name = "TEXT",
     .description = "the sharding in XLA's text form, e.g. '{devices=[4,2]<=[8]}'; required"},
    {.name = "devices", .type = FlagType::kInteger, .value_name = "N",
     .description = "devices the array lies on (needed for a replicated or maximal sharding)",
     .default_text = "the sharding's device count", .int_min = 1, .int_max = TileAssignment::kMaxDevices},
    {.name = "json", .type = FlagType::kBoolean,
     .description = "print one JSON object instead of the table", .default_text = "off"},
};

}  // namespace

constinit const CommandDef kShardInfoCommand{
    .name = "shard-info",
    .usage = "--shape D0,D1,... --sharding TEXT [flags]",
    .summary = "Prints, for each device, the part of an array it holds under a sharding: its "
               "index domain, replica and padded shard shape.",
    .flags = kFlags,
    .run = ShardInfoCommand};

absl::Status ShardInfoCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional().front(), "'"));
  }
  std::optional<std::string> shape_text = flags.Get("shape");
  std::optional<std::string> sharding_text = flags.Get("sharding");
  if (!shape_text.has_value()) return absl::InvalidArgumentError("--shape is required");
  if (!sharding_text.has_value()) return absl::InvalidArgumentError("--sharding is required");
  SHARDRT_ASSIGN_OR_RETURN(Shape shape, ParseShapeFlag(*shape_text));
  absl::StatusOr<Sharding> sharding = ParseSharding(*sharding_text);
  if (!sharding.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--sharding: ", sharding.status().message()));
  }
  std::optional<int64_t> devices;
  if (flags.Get("devices").has_value()) {
    SHARDRT_ASSIGN_OR_RETURN(devices,
                             flags.GetInt("devices", 0));
  }
  absl::StatusOr<ShardGeometry> geometry = ShardGeometry::Create(shape, *sharding, devices);
  if (!geometry.ok()) {
    std::string message(geometry.status().message());
    if (!devices.has_value() && (sharding->IsReplicated() || sharding->IsMaximal())) {
      absl::StrAppend(&message, " (pass --devices N)");
    }
    return absl::InvalidArgumentError(message);
  }
  const std::string out = flags.Has("json") ? Json(*geometry, *sharding)
                                            : Table(*geometry, *sharding);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return absl::OkStatus();
}

}  // namespace shardrt::cli
