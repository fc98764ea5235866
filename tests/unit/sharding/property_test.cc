// Property tests over random shapes (rank 0 to 5) and random valid shardings on 1 to 16
// devices. The seed is fixed so that a failure reproduces; each failure prints the case.
#include <algorithm>
#include <numeric>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/geometry.h"
#include "sharding/proto.h"
#include "shardrt/sharding/split.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {

constexpr uint64_t kSeed = 20240531;
constexpr int kCases = 4000;

struct Case {
  Shape shape;
  Sharding sharding;
  int64_t num_devices = 1;
  std::string Describe() const {
    return absl::StrCat("shape ", DimsToString(shape), " sharding ", sharding.ToString(),
                        " devices ", num_devices);
  }
};

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

Shape RandomShape(std::mt19937_64& rng, int64_t rank) {
  while (true) {
    Shape shape(rank);
    int64_t elements = 1;
    for (int64_t& d : shape) {
      d = Uniform(rng, 0, 9) == 0 ? 0 : Uniform(rng, 1, 7);
      elements *= d;
    }
    if (elements <= 3000) return shape;
  }
}

// A random tile assignment of shape `dims`: a random permutation, an iota, or a transposed
// iota.
TileAssignment RandomTiles(std::mt19937_64& rng, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  switch (Uniform(rng, 0, 2)) {
    case 0: {
      std::vector<int64_t> ids(n);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      return *TileAssignment::Create(dims, ids);
    }
    case 1:
      return *TileAssignment::Iota(dims);
    default: {
      Shape reshape = dims;
      std::shuffle(reshape.begin(), reshape.end(), rng);
      std::vector<int64_t> perm(reshape.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      return *TileAssignment::Iota(dims, {reshape, perm});
    }
  }
}

Case RandomCase(std::mt19937_64& rng) {
  Case c;
  c.shape = RandomShape(rng, Uniform(rng, 0, 5));
  const int64_t kind = Uniform(rng, 0, 9);
  if (kind == 0) {
    c.num_devices = Uniform(rng, 1, 16);
    return c;
  }
  if (kind == 1) {
    c.num_devices = Uniform(rng, 1, 16);
    c.sharding = *Sharding::Maximal(Uniform(rng, 0, c.num_devices - 1));
    return c;
  }
  if (kind == 2) {
    c.sharding = Sharding::Manual();
    return c;
  }
  Shape dims;
  int64_t n = 1;
  for (size_t i = 0; i < c.shape.size(); ++i) {
    dims.push_back(Uniform(rng, 1, std::min<int64_t>(4, 16 / n)));
    n *= dims.back();
  }
  std::vector<SubgroupType> types;
  const int64_t num_subgroups = Uniform(rng, 0, 2);
  for (int64_t i = 0; i < num_subgroups; ++i) {
    dims.push_back(Uniform(rng, 1, std::min<int64_t>(4, 16 / n)));
    n *= dims.back();
    types.push_back(Uniform(rng, 0, 2) == 0 ? SubgroupType::kManual : SubgroupType::kReplicated);
  }
  if (dims.empty()) dims.push_back(1);
  absl::StatusOr<Sharding> s = Sharding::Tiled(RandomTiles(rng, dims), types);
  EXPECT_TRUE(s.ok()) << s.status();
  c.sharding = *s;
  c.num_devices = s->num_devices().value_or(Uniform(rng, 1, 16));
  return c;
}

// The geometry of one device, recomputed directly from the definition.
struct Expected {
  bool holds_data = false;
  Shape start, limit;
  int64_t replica = 0;
};

Expected Reference(const Case& c, int64_t device) {
  Expected e;
  const int64_t rank = static_cast<int64_t>(c.shape.size());
  e.start.assign(rank, 0);
  e.limit = c.shape;
  if (c.sharding.IsReplicated()) {
    e.holds_data = true;
    e.replica = device;
    return e;
  }
  if (c.sharding.IsMaximal()) {
    e.holds_data = device == c.sharding.maximal_device();
    if (!e.holds_data) e.limit.assign(rank, 0);
    return e;
  }
  const TileAssignment& tiles = c.sharding.tile_assignment();
  const auto& ids = tiles.devices();
  int64_t p = std::find(ids.begin(), ids.end(), device) - ids.begin();
  Shape index(tiles.rank());
  for (int64_t i = tiles.rank() - 1; i >= 0; --i) {
    index[i] = p % tiles.dims()[i];
    p /= tiles.dims()[i];
  }
  e.holds_data = true;
  for (int64_t i = rank; i < tiles.rank(); ++i) e.replica = e.replica * tiles.dims()[i] + index[i];
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t n = c.shape[i], k = tiles.dims()[i];
    const int64_t s = (n + k - 1) / k;
    e.start[i] = std::min(index[i] * s, n);
    e.limit[i] = std::min((index[i] + 1) * s, n);
  }
  return e;
}

// Row-major offset of `index` in `dims`.
int64_t Offset(const Shape& dims, const Shape& index) {
  int64_t off = 0;
  for (size_t i = 0; i < dims.size(); ++i) off = off * dims[i] + index[i];
  return off;
}

// Calls f(index) for every index of `dims` in row-major order.
template <typename F>
void ForEachIndex(const Shape& dims, F f) {
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  Shape index(dims.size(), 0);
  while (true) {
    f(index);
    int64_t i = static_cast<int64_t>(dims.size()) - 1;
    for (; i >= 0; --i) {
      if (++index[i] < dims[i]) break;
      index[i] = 0;
    }
    if (i < 0) return;
  }
}

TEST(PropertyTest, TextAndProtoRoundTrip) {
  std::mt19937_64 rng(kSeed);
  for (int iter = 0; iter < kCases; ++iter) {
    const Case c = RandomCase(rng);
    SCOPED_TRACE(c.Describe());
    const std::string text = c.sharding.ToString();
    absl::StatusOr<Sharding> parsed = ParseSharding(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c.sharding);
    EXPECT_EQ(parsed->ToString(), text);
    absl::StatusOr<Sharding> explicit_form =
        ParseSharding(PrintSharding(c.sharding, DeviceListStyle::kExplicit));
    ASSERT_TRUE(explicit_form.ok()) << explicit_form.status();
    EXPECT_EQ(*explicit_form, c.sharding);
    absl::StatusOr<Sharding> from_proto = DeserializeSharding(SerializeSharding(c.sharding));
    ASSERT_TRUE(from_proto.ok()) << from_proto.status();
    EXPECT_EQ(*from_proto, c.sharding);
    EXPECT_EQ(from_proto->ToString(), text);
  }
}

TEST(PropertyTest, GeometryMatchesDefinitionAndCoversOnce) {
  std::mt19937_64 rng(kSeed + 1);
  for (int iter = 0; iter < kCases; ++iter) {
    const Case c = RandomCase(rng);
    if (c.sharding.IsManual()) continue;
    SCOPED_TRACE(c.Describe());
    absl::StatusOr<ShardGeometry> g = ShardGeometry::Create(c.shape, c.sharding, c.num_devices);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ(g->num_devices(), c.num_devices);
    int64_t elements = 1;
    for (int64_t d : c.shape) elements *= d;
    // Replica index -> how often each element is covered.
    std::vector<std::vector<int>> cover(g->num_replicas(), std::vector<int>(elements, 0));
    for (int64_t d = 0; d < c.num_devices; ++d) {
      const Expected e = Reference(c, d);
      ASSERT_EQ(g->holds_data(d), e.holds_data) << "device " << d;
      EXPECT_EQ(Shape(g->start(d).begin(), g->start(d).end()), e.start) << "device " << d;
      EXPECT_EQ(Shape(g->limit(d).begin(), g->limit(d).end()), e.limit) << "device " << d;
      if (!e.holds_data) continue;
      EXPECT_EQ(g->replica(d), e.replica) << "device " << d;
      for (size_t i = 0; i < c.shape.size(); ++i) {
        EXPECT_LE(e.limit[i] - e.start[i], g->shard_shape()[i]);
      }
      ForEachIndex(g->exact_shape(d), [&](const Shape& local) {
        Shape global = local;
        for (size_t i = 0; i < global.size(); ++i) global[i] += e.start[i];
        ++cover[g->replica(d)][Offset(c.shape, global)];
      });
    }
    for (int64_t r = 0; r < g->num_replicas(); ++r) {
      for (int64_t i = 0; i < elements; ++i) {
        ASSERT_EQ(cover[r][i], 1) << "replica " << r << " element " << i;
      }
    }
  }
}

TEST(PropertyTest, AssembleOfSplitIsIdentity) {
  std::mt19937_64 rng(kSeed + 2);
  const ElementType types[] = {ElementType::kPred, ElementType::kS8,  ElementType::kBF16,
                               ElementType::kF32,  ElementType::kU64, ElementType::kF16};
  for (int iter = 0; iter < kCases; ++iter) {
    const Case c = RandomCase(rng);
    if (c.sharding.IsManual()) continue;
    SCOPED_TRACE(c.Describe());
    absl::StatusOr<ShardGeometry> g = ShardGeometry::Create(c.shape, c.sharding, c.num_devices);
    ASSERT_TRUE(g.ok()) << g.status();
    const ElementType type = types[Uniform(rng, 0, 5)];
    const int64_t elem = ElementSizeInBytes(type);
    std::vector<std::byte> x(g->num_elements() * elem);
    for (std::byte& b : x) b = static_cast<std::byte>(rng());
    for (ShardPadding padding : {ShardPadding::kPadded, ShardPadding::kExact}) {
      auto shards = SplitHostArray(*g, type, x, padding);
      ASSERT_TRUE(shards.ok()) << shards.status();
      // Each buffer against an element-by-element reference.
      for (int64_t d = 0; d < c.num_devices; ++d) {
        const Shape exact = g->exact_shape(d);
        const Shape dims = padding == ShardPadding::kPadded ? g->shard_shape() : exact;
        std::vector<std::byte> want(*ShardByteSize(*g, type, d, padding));
        if (g->holds_data(d)) ForEachIndex(exact, [&](const Shape& local) {
          Shape global = local;
          for (size_t i = 0; i < global.size(); ++i) global[i] += g->start(d)[i];
          std::memcpy(want.data() + Offset(dims, local) * elem,
                      x.data() + Offset(c.shape, global) * elem, elem);
        });
        ASSERT_EQ((*shards)[d], want) << "device " << d;
      }
      std::vector<std::span<const std::byte>> views(shards->begin(), shards->end());
      auto back = AssembleHostArray(*g, type, views, padding, ReplicaCheck::kVerify);
      ASSERT_TRUE(back.ok()) << back.status();
      ASSERT_EQ(*back, x);

      // Corrupting any byte of a replica other than 0 is caught.
      if (g->num_replicas() > 1 && g->num_elements() > 0) {
        for (int64_t d = 0; d < c.num_devices; ++d) {
          if (g->replica(d) == 0 || !g->holds_data(d)) continue;
          const Shape exact = g->exact_shape(d);
          if (std::find(exact.begin(), exact.end(), 0) != exact.end()) continue;
          std::vector<std::byte> bad = (*shards)[d];
          bad[0] ^= std::byte{1};  // element 0 of the buffer is always inside the domain
          views[d] = bad;
          auto mismatch = AssembleHostArray(*g, type, views, padding, ReplicaCheck::kVerify);
          ASSERT_FALSE(mismatch.ok());
          EXPECT_THAT(mismatch.status().message(),
                      ::testing::HasSubstr(absl::StrCat("device ", d, " ")));
          break;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardrt
