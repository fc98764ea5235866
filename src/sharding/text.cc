#include "shardrt/sharding/text.h"

#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"
#include "absl/strings/str_join.h"

namespace shardrt {
namespace {

bool IsWordStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Integers with the byte offset each started at.
struct IntList {
  size_t start = 0;
  std::vector<int64_t> values;
  std::vector<size_t> positions;
};

// A recursive-descent parser over the text; every error carries the byte offset.
class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Sharding> Parse();

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  absl::Status Error(size_t pos, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding text at position ", pos, ": ", message));
  }
  // Describes what is at the current position, for "expected X, got Y".
  std::string Got() const {
    if (AtEnd()) return "end of text";
    size_t end = pos_ + 1;
    if (IsWordChar(text_[pos_])) {
      while (end < text_.size() && IsWordChar(text_[end]) && end - pos_ < 24) ++end;
    }
    return absl::StrCat("'", absl::CHexEscape(text_.substr(pos_, end - pos_)), "'");
  }
  absl::Status Expect(char c) {
    SkipSpace();
    if (Peek() != c || AtEnd()) {
      return Error(pos_, absl::StrCat("expected '", absl::string_view(&c, 1), "', got ", Got()));
    }
    ++pos_;
    return absl::OkStatus();
  }
  absl::StatusOr<absl::string_view> Word(absl::string_view expected) {
    SkipSpace();
    if (!IsWordStart(Peek())) {
      return Error(pos_, absl::StrCat("expected ", expected, ", got ", Got()));
    }
    size_t start = pos_;
    while (!AtEnd() && IsWordChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  absl::Status ExpectWord(absl::string_view word) {
    size_t start = (SkipSpace(), pos_);
    absl::StatusOr<absl::string_view> got = Word(absl::StrCat("'", word, "'"));
    if (!got.ok()) return got.status();
    if (*got != word) {
      return Error(start, absl::StrCat("expected '", word, "', got '", *got, "'"));
    }
    return absl::OkStatus();
  }
  // A non-negative decimal integer.
  absl::StatusOr<int64_t> Int(absl::string_view what) {
    SkipSpace();
    const size_t start = pos_;
    if (Peek() == '-' && pos_ + 1 < text_.size() && IsDigit(text_[pos_ + 1])) {
      return Error(start, absl::StrCat(what, " must not be negative"));
    }
    if (!IsDigit(Peek())) return Error(start, absl::StrCat("expected ", what, ", got ", Got()));
    int64_t value = 0;
    while (!AtEnd() && IsDigit(text_[pos_])) {
      if (!CheckedMul(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        return Error(start, absl::StrCat(what, " does not fit in int64"));
      }
      ++pos_;
    }
    return value;
  }
  // open INT (',' INT)* close
  absl::StatusOr<IntList> Ints(char open, char close, absl::string_view what) {
    IntList list;
    absl::Status status = Expect(open);
    if (!status.ok()) return status;
    list.start = pos_ - 1;
    while (true) {
      SkipSpace();
      list.positions.push_back(pos_);
      absl::StatusOr<int64_t> value = Int(what);
      if (!value.ok()) return value.status();
      list.values.push_back(*value);
      SkipSpace();
      if (Peek() == close && !AtEnd()) {
        ++pos_;
        return list;
      }
      if (Peek() != ',' || AtEnd()) {
        return Error(pos_, absl::StrCat("expected ',' or '", absl::string_view(&close, 1),
                                        "', got ", Got()));
      }
      ++pos_;
    }
  }
  // Checks that dims are positive and returns their product, at most kMaxDevices.
  absl::StatusOr<int64_t> Product(const IntList& dims, absl::string_view what) {
    int64_t product = 1;
    for (size_t i = 0; i < dims.values.size(); ++i) {
      if (dims.values[i] == 0) return Error(dims.positions[i], absl::StrCat(what, " must be positive, got 0"));
    }
    for (int64_t d : dims.values) {
      if (!CheckedMul(product, d, &product) || product > TileAssignment::kMaxDevices) {
        return Error(dims.start, absl::StrCat(what, "s ", DimsToString(dims.values),
                                              " need more than ", TileAssignment::kMaxDevices,
                                              " devices"));
      }
    }
    return product;
  }
  // Skips a balanced {...}, honoring "..." strings (used for metadata={...}).
  absl::Status SkipBraced() {
    absl::Status status = Expect('{');
    if (!status.ok()) return status;
    const size_t start = pos_ - 1;
    int depth = 1;
    bool in_string = false;
    while (!AtEnd() && depth > 0) {
      char c = text_[pos_++];
      if (in_string) {
        if (c == '\\' && !AtEnd()) {
          ++pos_;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        --depth;
      }
    }
    if (depth > 0) return Error(start, "unterminated '{'");
    return absl::OkStatus();
  }

  absl::StatusOr<TileAssignment> ParseTileAssignment();
  absl::StatusOr<std::vector<SubgroupType>> ParseSubgroupTypes();

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::StatusOr<TileAssignment> Parser::ParseTileAssignment() {
  absl::Status status = Expect('=');
  if (!status.ok()) return status;
  absl::StatusOr<IntList> dims = Ints('[', ']', "tile dim");
  if (!dims.ok()) return dims.status();
  absl::StatusOr<int64_t> count = Product(*dims, "tile dim");
  if (!count.ok()) return count.status();

  SkipSpace();
  if (Peek() == '<') {  // iota form
    const size_t start = pos_;
    if (pos_ + 1 >= text_.size() || text_[pos_ + 1] != '=') {
      return Error(start, absl::StrCat("expected '<=', got ", Got()));
    }
    pos_ += 2;
    absl::StatusOr<IntList> reshape = Ints('[', ']', "iota reshape dim");
    if (!reshape.ok()) return reshape.status();
    absl::StatusOr<int64_t> iota_count = Product(*reshape, "iota reshape dim");
    if (!iota_count.ok()) return iota_count.status();
    if (*iota_count != *count) {
      return Error(reshape->start,
                   absl::StrCat("iota reshape dims ", DimsToString(reshape->values), " hold ",
                                *iota_count, " devices but tile dims ",
                                DimsToString(dims->values), " need ", *count));
    }
    TileAssignment::IotaForm iota{reshape->values, {}};
    SkipSpace();
    if (Peek() == 'T') {
      ++pos_;
      absl::StatusOr<IntList> perm = Ints('(', ')', "transpose dim");
      if (!perm.ok()) return perm.status();
      absl::Status perm_ok = CheckPermutation(
          perm->values, static_cast<int64_t>(reshape->values.size()), "iota transpose");
      if (!perm_ok.ok()) return Error(perm->start, perm_ok.message());
      iota.perm = perm->values;
    }
    absl::StatusOr<TileAssignment> tiles = TileAssignment::Iota(dims->values, std::move(iota));
    if (!tiles.ok()) return Error(start, tiles.status().message());
    return tiles;
  }

  // Explicit list: INT (',' INT)*
  IntList ids;
  ids.start = pos_;
  while (true) {
    SkipSpace();
    ids.positions.push_back(pos_);
    absl::StatusOr<int64_t> id = Int("device id");
    if (!id.ok()) return id.status();
    ids.values.push_back(*id);
    SkipSpace();
    if (Peek() != ',' || AtEnd()) break;
    ++pos_;
  }
  if (static_cast<int64_t>(ids.values.size()) != *count) {
    return Error(ids.start, absl::StrCat("tile assignment has ", ids.values.size(),
                                         " devices but tile dims ", DimsToString(dims->values),
                                         " need ", *count));
  }
  std::vector<bool> seen(*count, false);
  for (size_t i = 0; i < ids.values.size(); ++i) {
    const int64_t id = ids.values[i];
    if (id >= *count) {
      return Error(ids.positions[i],
                   absl::StrCat("device id ", id, " out of range [0, ", *count, ")"));
    }
    if (seen[id]) return Error(ids.positions[i], absl::StrCat("duplicate device id ", id));
    seen[id] = true;
  }
  absl::StatusOr<TileAssignment> tiles = TileAssignment::Create(dims->values, ids.values);
  if (!tiles.ok()) return Error(ids.start, tiles.status().message());
  return tiles;
}

absl::StatusOr<std::vector<SubgroupType>> Parser::ParseSubgroupTypes() {
  absl::Status status = Expect('=');
  if (!status.ok()) return status;
  status = Expect('{');
  if (!status.ok()) return status;
  std::vector<SubgroupType> types;
  while (true) {
    size_t start = (SkipSpace(), pos_);
    absl::StatusOr<absl::string_view> word = Word("'manual' or 'replicated'");
    if (!word.ok()) return word.status();
    if (*word == "manual") {
      types.push_back(SubgroupType::kManual);
    } else if (*word == "replicated") {
      types.push_back(SubgroupType::kReplicated);
    } else if (*word == "unreduced" || *word == "maximal") {
      return Error(start, absl::StrCat("subgroup type '", *word, "' is not supported"));
    } else {
      return Error(start, absl::StrCat("expected 'manual' or 'replicated', got '", *word, "'"));
    }
    SkipSpace();
    if (Peek() == '}' && !AtEnd()) {
      ++pos_;
      return types;
    }
    if (Peek() != ',' || AtEnd()) {
      return Error(pos_, absl::StrCat("expected ',' or '}', got ", Got()));
    }
    ++pos_;
  }
}

absl::StatusOr<Sharding> Parser::Parse() {
  absl::Status status = Expect('{');
  if (!status.ok()) return status;
  SkipSpace();
  if (Peek() == '{') return Error(pos_, "tuple shardings are not supported");
  const size_t body_start = pos_;
  absl::StatusOr<absl::string_view> word =
      Word("'replicated', 'maximal', 'manual' or 'devices'");
  if (!word.ok()) return word.status();

  Sharding result;
  std::optional<TileAssignment> tiles;
  if (*word == "replicated") {
    result = Sharding::Replicated();
  } else if (*word == "manual") {
    result = Sharding::Manual();
  } else if (*word == "maximal") {
    status = ExpectWord("device");
    if (!status.ok()) return status;
    status = Expect('=');
    if (!status.ok()) return status;
    absl::StatusOr<int64_t> device = Int("maximal device id");
    if (!device.ok()) return device.status();
    absl::StatusOr<Sharding> maximal = Sharding::Maximal(*device);
    if (!maximal.ok()) return Error(body_start, maximal.status().message());
    result = *std::move(maximal);
  } else if (*word == "devices") {
    absl::StatusOr<TileAssignment> parsed = ParseTileAssignment();
    if (!parsed.ok()) return parsed.status();
    tiles = *std::move(parsed);
  } else if (*word == "unknown" || *word == "unreduced") {
    return Error(body_start, absl::StrCat("'{", *word, "}' shardings are not supported"));
  } else {
    return Error(body_start,
                 absl::StrCat("expected 'replicated', 'maximal', 'manual' or 'devices', got '",
                              *word, "'"));
  }

  std::optional<std::vector<SubgroupType>> subgroups;
  size_t subgroups_start = 0;
  while (true) {
    SkipSpace();
    if (Peek() == '}' || AtEnd()) break;
    const size_t start = pos_;
    if (!IsWordStart(Peek())) {
      return Error(pos_, absl::StrCat("expected '}', got ", Got()));
    }
    absl::StatusOr<absl::string_view> suffix = Word("a keyword");
    if (!suffix.ok()) return suffix.status();
    if (*suffix == "last_tile_dim_replicate" || *suffix == "last_tile_dims") {
      if (!tiles.has_value()) {
        return Error(start, absl::StrCat("'", *suffix, "' needs a devices=[...] sharding"));
      }
      if (subgroups.has_value()) {
        return Error(start, "last_tile_dim_replicate / last_tile_dims given twice");
      }
      subgroups_start = start;
      if (*suffix == "last_tile_dim_replicate") {
        subgroups = std::vector<SubgroupType>{SubgroupType::kReplicated};
      } else {
        absl::StatusOr<std::vector<SubgroupType>> types = ParseSubgroupTypes();
        if (!types.ok()) return types.status();
        subgroups = *std::move(types);
      }
    } else if (*suffix == "metadata") {
      status = Expect('=');
      if (!status.ok()) return status;
      status = SkipBraced();
      if (!status.ok()) return status;
    } else if (*suffix == "shard_as" || *suffix == "shard_like") {
      return Error(start, "shard groups are not supported");
    } else {
      return Error(start, absl::StrCat("unexpected '", *suffix, "'"));
    }
  }
  status = Expect('}');
  if (!status.ok()) return status;
  SkipSpace();
  if (!AtEnd()) {
    return Error(pos_, absl::StrCat("unexpected text after the sharding: ", Got()));
  }

  if (tiles.has_value()) {
    std::vector<SubgroupType> types = subgroups.value_or(std::vector<SubgroupType>{});
    if (static_cast<int64_t>(types.size()) > tiles->rank()) {
      return Error(subgroups_start,
                   absl::StrCat("last_tile_dims has ", types.size(),
                                " types but the tile assignment has only ", tiles->rank(),
                                " dims"));
    }
    absl::StatusOr<Sharding> tiled = Sharding::Tiled(*std::move(tiles), types);
    if (!tiled.ok()) return Error(body_start, tiled.status().message());
    result = *std::move(tiled);
  }
  return result;
}

}  // namespace

absl::StatusOr<Sharding> ParseSharding(absl::string_view text) {
  if (static_cast<int64_t>(text.size()) > limits::kMaxShardingTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("sharding text has ", text.size(),
                                                   " bytes; the limit is ",
                                                   limits::kMaxShardingTextBytes));
  }
  return Parser(text).Parse();
}

std::string PrintSharding(const Sharding& sharding, DeviceListStyle style) {
  switch (sharding.kind()) {
    case Sharding::Kind::kReplicated:
      return "{replicated}";
    case Sharding::Kind::kManual:
      return "{manual}";
    case Sharding::Kind::kMaximal:
      return absl::StrCat("{maximal device=", sharding.maximal_device(), "}");
    case Sharding::Kind::kTiled:
      break;
  }
  const TileAssignment& tiles = sharding.tile_assignment();
  std::string out = absl::StrCat("{devices=", DimsToString(tiles.dims()));
  std::optional<TileAssignment::IotaForm> iota;
  if (style == DeviceListStyle::kCanonical) iota = tiles.AsIota();
  if (iota.has_value()) {
    absl::StrAppend(&out, "<=", DimsToString(iota->reshape_dims));
    if (!iota->perm.empty()) absl::StrAppend(&out, "T(", absl::StrJoin(iota->perm, ","), ")");
  } else {
    absl::StrAppend(&out, absl::StrJoin(tiles.devices(), ","));
  }
  if (sharding.ReplicateOnLastTileDim()) {
    absl::StrAppend(&out, " last_tile_dim_replicate");
  } else if (!sharding.subgroup_types().empty()) {
    absl::StrAppend(&out, " last_tile_dims={",
                    absl::StrJoin(sharding.subgroup_types(), ", ",
                                  [](std::string* s, SubgroupType t) {
                                    s->append(t == SubgroupType::kManual ? "manual"
                                                                         : "replicated");
                                  }),
                    "}");
  }
  out += "}";
  return out;
}

std::string Sharding::ToString() const { return PrintSharding(*this); }

}  // namespace shardrt
