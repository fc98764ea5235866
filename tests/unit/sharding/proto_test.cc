#include "sharding/proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Sharding Parse(const char* text) {
  absl::StatusOr<Sharding> s = ParseSharding(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : Sharding();
}

class ProtoRoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ProtoRoundTripTest, BytesAgreeWithText) {
  Sharding s = Parse(GetParam());
  std::string bytes = SerializeSharding(s);
  absl::StatusOr<Sharding> back = DeserializeSharding(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(back->ToString(), s.ToString());
}

INSTANTIATE_TEST_SUITE_P(
    Table, ProtoRoundTripTest,
    ::testing::Values("{replicated}", "{manual}", "{maximal device=5}",
                      "{devices=[2,2]<=[4]}", "{devices=[4,2]<=[2,4]T(1,0)}",
                      "{devices=[2,2]3,1,2,0}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                      "{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
                      "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
                      "{devices=[1,1,2,2,2]<=[8]}"));

TEST(ProtoTest, FieldsFollowXla) {
  xla::OpSharding p = ToOpSharding(Parse("{devices=[4,2]<=[2,4]T(1,0)}"));
  EXPECT_EQ(p.type(), xla::OpSharding::OTHER);
  EXPECT_THAT(p.tile_assignment_dimensions(), ElementsAre(4, 2));
  EXPECT_TRUE(p.tile_assignment_devices().empty());
  EXPECT_THAT(p.iota_reshape_dims(), ElementsAre(2, 4));
  EXPECT_THAT(p.iota_transpose_perm(), ElementsAre(1, 0));

  p = ToOpSharding(Parse("{devices=[2,2]3,1,2,0 last_tile_dim_replicate}"));
  EXPECT_TRUE(p.replicate_on_last_tile_dim());
  EXPECT_THAT(p.tile_assignment_devices(), ElementsAre(1, 3, 0, 2));
  EXPECT_TRUE(p.iota_reshape_dims().empty());

  p = ToOpSharding(Parse("{devices=[2,1,2]<=[4] last_tile_dims={manual}}"));
  EXPECT_FALSE(p.replicate_on_last_tile_dim());
  EXPECT_THAT(p.last_tile_dims(), ElementsAre(xla::OpSharding::MANUAL));

  p = ToOpSharding(*Sharding::Maximal(3));
  EXPECT_EQ(p.type(), xla::OpSharding::MAXIMAL);
  EXPECT_THAT(p.tile_assignment_devices(), ElementsAre(3));
}

TEST(ProtoTest, ReadsExplicitAndIotaForms) {
  xla::OpSharding p;
  p.set_type(xla::OpSharding::OTHER);
  for (int64_t d : {4, 2}) p.add_tile_assignment_dimensions(d);
  for (int64_t d : {0, 4, 1, 5, 2, 6, 3, 7}) p.add_tile_assignment_devices(d);
  absl::StatusOr<Sharding> s = FromOpSharding(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(), "{devices=[4,2]<=[2,4]T(1,0)}");
}

TEST(ProtoTest, Errors) {
  EXPECT_THAT(DeserializeSharding("\xff\xff\xff").status().message(),
              HasSubstr("not a valid serialized OpSharding"));
  xla::OpSharding p;
  p.set_type(xla::OpSharding::OTHER);
  p.add_tile_assignment_dimensions(2);
  p.add_tile_assignment_dimensions(2);
  p.add_tile_assignment_devices(0);
  EXPECT_THAT(FromOpSharding(p).status().message(),
              HasSubstr("tile assignment has 1 devices but tile dims [2,2] need 4"));
  p.add_iota_reshape_dims(4);
  EXPECT_THAT(FromOpSharding(p).status().message(), HasSubstr("both"));
  p.clear_tile_assignment_devices();
  EXPECT_THAT(FromOpSharding(p).status().message(), HasSubstr("iota_transpose_perm"));
  p.add_iota_transpose_perm(0);
  EXPECT_TRUE(FromOpSharding(p).ok());
  p.set_replicate_on_last_tile_dim(true);
  p.add_last_tile_dims(xla::OpSharding::MANUAL);
  EXPECT_THAT(FromOpSharding(p).status().message(), HasSubstr("both"));

  xla::OpSharding maximal;
  maximal.set_type(xla::OpSharding::MAXIMAL);
  EXPECT_THAT(FromOpSharding(maximal).status().message(), HasSubstr("exactly one"));
  xla::OpSharding tuple;
  tuple.set_type(xla::OpSharding::TUPLE);
  EXPECT_THAT(FromOpSharding(tuple).status().message(), HasSubstr("tuple"));
  xla::OpSharding unknown;
  unknown.set_type(xla::OpSharding::UNKNOWN);
  EXPECT_THAT(FromOpSharding(unknown).status().message(), HasSubstr("not supported"));
}

}  // namespace
}  // namespace shardrt
