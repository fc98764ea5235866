// The StableHLO writer: the builder's type text for every element type, its errors (types it
// cannot write, overflowing counts, dimensions that do not exist), array specs' shardings and
// shard shapes, and modules that read back (InspectProgram) as the signature WriteModule gives.
#include "shardrt/program/builder.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shardrt/program/array_spec.h"
#include "shardrt/program/program_text.h"
#include "shardrt/sharding/text.h"

namespace shardrt::stablehlo {
namespace {

// Every element type shardrt knows, with the MLIR name the builder must write for it.
const std::pair<ElementType, const char*> kAllTypes[] = {
    {ElementType::kPred, "i1"}, {ElementType::kS8, "i8"},     {ElementType::kS16, "i16"},
    {ElementType::kS32, "i32"}, {ElementType::kS64, "i64"},   {ElementType::kU8, "ui8"},
    {ElementType::kU16, "ui16"}, {ElementType::kU32, "ui32"}, {ElementType::kU64, "ui64"},
    {ElementType::kF16, "f16"}, {ElementType::kF32, "f32"},   {ElementType::kF64, "f64"},
    {ElementType::kBF16, "bf16"},
};

TEST(BuilderTest, WritesEveryElementTypeWithItsOwnMlirName) {
  for (const auto& [type, name] : kAllTypes) {
    SCOPED_TRACE(name);
    Builder b;
    Value x = Builder::Parameter(0, ArrayShape{type, {4, 2}});
    Value y = b.Transpose(x, {1, 0});
    Value c = b.Splat(1.0, ArrayShape{type, {2, 4}});
    Value f = b.Convert(y, ElementType::kF32);
    Value back = b.Convert(f, type);
    ASSERT_TRUE(b.status().ok()) << b.status();
    EXPECT_EQ(y.shape, (ArrayShape{type, {2, 4}}));
    EXPECT_EQ(back.shape, (ArrayShape{type, {2, 4}}));
    const std::string tensor = absl::StrCat("tensor<2x4x", name, ">");
    EXPECT_TRUE(absl::StrContains(b.body(), absl::StrCat("(tensor<4x2x", name, ">) -> ", tensor)))
        << b.body();
    EXPECT_TRUE(absl::StrContains(b.body(), absl::StrCat("> : ", tensor, "} : () -> ", tensor)))
        << b.body();
    EXPECT_TRUE(absl::StrContains(b.body(), absl::StrCat("(tensor<2x4xf32>) -> ", tensor)))
        << b.body();
    (void)c;
    // Only f32 for f32: no type falls back to another one.
    if (type != ElementType::kF32) {
      EXPECT_FALSE(absl::StrContains(b.body(), absl::StrCat("(tensor<4x2xf32>) -> ")))
          << b.body();
    }
  }
}

TEST(BuilderTest, SplatLiteralsFollowTheElementType) {
  Builder b;
  b.Splat(2.5, F32({}));
  b.Splat(3.0, I32({}));
  b.Splat(1.0, ArrayShape{ElementType::kPred, {}});
  b.Splat(0.5, ArrayShape{ElementType::kBF16, {}});
  ASSERT_TRUE(b.status().ok()) << b.status();
  EXPECT_TRUE(absl::StrContains(b.body(), "dense<2.500000000e+00> : tensor<f32>")) << b.body();
  EXPECT_TRUE(absl::StrContains(b.body(), "dense<3> : tensor<i32>")) << b.body();
  EXPECT_TRUE(absl::StrContains(b.body(), "dense<true> : tensor<i1>")) << b.body();
  EXPECT_TRUE(absl::StrContains(b.body(), "dense<5.000000000e-01> : tensor<bf16>")) << b.body();
}

TEST(BuilderTest, ATypeWithoutMlirNameIsAnInvalidArgumentError) {
  Builder b;
  Value x = Builder::Parameter(0, F32({3}));
  b.Convert(x, ElementType::kInvalid);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(b.status().message(), "has no MLIR name")) << b.status();
  // The first problem is kept; later ones do not replace it.
  b.Transpose(x, {3});
  EXPECT_TRUE(absl::StrContains(b.status().message(), "has no MLIR name")) << b.status();
}

TEST(BuilderTest, OverflowingElementCountsAreErrors) {
  {
    Builder b;
    b.Splat(0.0, F32({int64_t{1} << 32, int64_t{1} << 32}));
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(b.status().message(), "overflows int64")) << b.status();
  }
  {
    Builder b;  // the element count fits, the byte count does not
    b.Iota(ArrayShape{ElementType::kF64, {int64_t{1} << 61}}, 0);
    EXPECT_TRUE(absl::StrContains(b.status().message(), "byte size overflows int64"))
        << b.status();
  }
  {
    Builder b;  // gathering multiplies a dimension by the partitions
    b.AllGather(Builder::Parameter(0, F32({int64_t{1} << 62})), 0, 8);
    EXPECT_TRUE(absl::StrContains(b.status().message(), "overflows int64")) << b.status();
  }
  {
    Builder b;
    b.Constant({1.0f, 2.0f, 3.0f}, {2, 2});
    EXPECT_TRUE(absl::StrContains(b.status().message(), "3 values for dims [2,2]"))
        << b.status();
  }
  ArraySpec spec{"big", ElementType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, -1};
  auto count = spec.num_elements();
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(count.status().message(), "array 'big'")) << count.status();
  EXPECT_EQ(*ArraySpec({"small", ElementType::kF32, {3, 4}, -1}).num_elements(), 12);
  EXPECT_EQ(*ArraySpec({"scalar", ElementType::kS32, {}, -1}).num_elements(), 1);
}

TEST(BuilderTest, DimensionsThatDoNotExistAreErrorsNotCrashes) {
  const Value x = Builder::Parameter(0, F32({2, 3}));
  auto fails = [](const Builder& b, absl::string_view op) {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << op;
    EXPECT_TRUE(absl::StrContains(b.status().message(), op)) << b.status();
  };
  {
    Builder b;
    b.Transpose(x, {0, 2});
    fails(b, "stablehlo.transpose: dimension 2 of f32[2,3] does not exist");
  }
  {
    Builder b;
    b.Dot(x, x, {}, {}, {1}, {5});
    fails(b, "stablehlo.dot_general");
  }
  {
    Builder b;
    b.Reduce(x, {-1}, "add", b.Splat(0.0, F32({})));
    fails(b, "stablehlo.reduce");
  }
  {
    Builder b;
    b.Concatenate({}, 0);
    fails(b, "stablehlo.concatenate: no operands");
  }
  {
    Builder b;
    b.Slice(x, {0}, {1});
    fails(b, "stablehlo.slice");
  }
  {
    Builder b;
    b.Gather(x, x);
    fails(b, "stablehlo.gather");
  }
}

TEST(ArraySpecTest, ShardingsComeFromTheShardingLayer) {
  ArraySpec spec{"w", ElementType::kF32, {8, 6}, 1};
  auto split = ShardingOf(spec, 3);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(PrintSharding(*split), "{devices=[1,3]<=[3]}");
  EXPECT_EQ(*ShardDims(spec, 3), (std::vector<int64_t>{8, 2}));
  EXPECT_TRUE(ShardingOf(spec, 1)->IsReplicated());
  EXPECT_EQ(*ShardDims(spec, 1), (std::vector<int64_t>{8, 6}));
  spec.split_dim = -1;
  EXPECT_TRUE(ShardingOf(spec, 4)->IsReplicated());
  EXPECT_EQ(*ShardDims(spec, 4), (std::vector<int64_t>{8, 6}));
  spec.split_dim = 0;
  EXPECT_EQ(PrintSharding(*ShardingOf(spec, 2)), "{devices=[2,1]<=[2]}");
  EXPECT_EQ(*ShardDims(spec, 2), (std::vector<int64_t>{4, 6}));

  auto uneven = ShardingOf(spec, 3);
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(uneven.status().message(),
                                "array 'w' f32[8,6]: dimension 0 (8) does not split evenly over 3"))
      << uneven.status();
  spec.split_dim = 2;
  EXPECT_TRUE(absl::StrContains(ShardDims(spec, 2).status().message(), "split dimension 2"))
      << ShardDims(spec, 2).status();
  spec.split_dim = 0;
  EXPECT_FALSE(ShardingOf(spec, 0).ok());
}

// A two-parameter module over 2 partitions: every type and sharding written reads back as the
// signature WriteModule returns, and the manual-SPMD entry uses the sharding layer's shard shape.
TEST(WriteModuleTest, ReadsBackAsTheSignatureItReturns) {
  ModuleSpec spec;
  spec.parameters = {ArraySpec{"x", ElementType::kBF16, {4, 6}, 0},
                     ArraySpec{"n", ElementType::kU16, {}, -1}};
  spec.outputs = {ArraySpec{"y", ElementType::kBF16, {4, 6}, 0},
                  ArraySpec{"n", ElementType::kU16, {}, -1}};
  spec.aliases = {{0, 0}};
  Builder b;
  Value x = Builder::Parameter(0, spec.parameters[0].shape());
  Value local = b.FullToShard(x, *ShardingOf(spec.parameters[0], 2));
  EXPECT_EQ(local.shape, (ArrayShape{ElementType::kBF16, *ShardDims(spec.parameters[0], 2)}));
  Value doubled = b.Add(local, local);
  Value y = b.ShardToFull(doubled, *ShardingOf(spec.outputs[0], 2), spec.outputs[0].shape());
  const Value n = Builder::Parameter(1, spec.parameters[1].shape());
  auto module = WriteModule("twice", 2, spec, b, {y, n});
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->signature.parameters,
            (std::vector<ArrayShape>{{ElementType::kBF16, {4, 6}}, {ElementType::kU16, {}}}));
  EXPECT_EQ(module->signature.results, module->signature.parameters);
  auto info = InspectProgram(module->text);
  ASSERT_TRUE(info.ok()) << info.status() << "\n" << module->text;
  ASSERT_TRUE(info->signature.has_value());
  EXPECT_EQ(*info->signature, module->signature);
  EXPECT_EQ(info->declared_partitions, 2);
  EXPECT_EQ(info->declared_replicas, 1);
  EXPECT_TRUE(absl::StrContains(module->text, "tensor<2x6xbf16>")) << module->text;
  EXPECT_TRUE(absl::StrContains(module->text, "mhlo.sharding = \"{devices=[2,1]<=[2]}\", "
                                              "tf.aliasing_output = 0 : i32"))
      << module->text;
  EXPECT_TRUE(absl::StrContains(module->text, "func.return %v"));
}

TEST(WriteModuleTest, MismatchesAndTheBuildersErrorsAreReported) {
  ModuleSpec spec;
  spec.parameters = {ArraySpec{"x", ElementType::kF32, {4}, -1}};
  spec.outputs = {ArraySpec{"y", ElementType::kF32, {4}, -1}};
  const Value x = Builder::Parameter(0, spec.parameters[0].shape());
  Builder ok;
  EXPECT_TRUE(WriteModule("m", 1, spec, ok, {x}).ok());

  auto count = WriteModule("m", 1, spec, ok, {});
  EXPECT_TRUE(absl::StrContains(count.status().message(), "0 results for 1 outputs"))
      << count.status();
  auto type = WriteModule("m", 1, spec, ok, {Builder::Parameter(0, I32({4}))});
  EXPECT_TRUE(absl::StrContains(type.status().message(),
                                "output 0 (y): the body returns s32[4], expected f32[4]"))
      << type.status();
  auto name = WriteModule("bad name", 1, spec, ok, {x});
  EXPECT_TRUE(absl::StrContains(name.status().message(), "module name 'bad name'"))
      << name.status();

  ModuleSpec aliased = spec;
  aliased.aliases = {{0, 1}};
  EXPECT_TRUE(absl::StrContains(WriteModule("m", 1, aliased, ok, {x}).status().message(),
                                "alias (0, 1) is out of range"));
  ModuleSpec invalid = spec;
  invalid.outputs[0].type = ElementType::kInvalid;
  auto unwritable = WriteModule("m", 1, invalid, ok, {x});
  EXPECT_EQ(unwritable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unwritable.status().message(), "output 0: y: cannot write"))
      << unwritable.status();
  ModuleSpec uneven = spec;
  uneven.parameters[0].split_dim = 0;
  EXPECT_TRUE(absl::StrContains(WriteModule("m", 3, uneven, ok, {x}).status().message(),
                                "parameter 0: array 'x' f32[4]: dimension 0 (4) does not split "
                                "evenly over 3"));

  Builder bad;
  bad.Transpose(x, {1});
  auto body = WriteModule("m", 1, spec, bad, {x});
  EXPECT_TRUE(absl::StrContains(body.status().message(), "module @m: stablehlo.transpose"))
      << body.status();
}

}  // namespace
}  // namespace shardrt::stablehlo

namespace shardrt::stablehlo {
namespace {

TEST(BuilderTest, CustomCallsAreTypedFfiCallsWithRowMajorLayoutsAndI32Attributes) {
  Builder b;
  Value x = Builder::Parameter(0, F32({2, 8}));
  Value w = Builder::Parameter(1, ArrayShape{ElementType::kU8, {3, 4, 20}});
  Value layer = b.I32(1);
  Value y = b.CustomCall("my_kernel", {x, w, layer}, F32({2, 4}), {{"type", 3}, {"k", -1}},
                         Sharding::Manual());
  ASSERT_TRUE(b.status().ok()) << b.status();
  EXPECT_EQ(y.shape, F32({2, 4}));
  const std::string& body = b.body();
  EXPECT_TRUE(absl::StrContains(
      body, "call_target_name = \"my_kernel\", api_version = 4 : i32, operand_layouts = "
            "[dense<[1, 0]> : tensor<2xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<> : "
            "tensor<0xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], "
            "backend_config = {type = 3 : i32, k = -1 : i32}, mhlo.sharding = \"{manual}\""))
      << body;
  EXPECT_TRUE(absl::StrContains(
      body, "(tensor<2x8xf32>, tensor<3x4x20xui8>, tensor<i32>) -> tensor<2x4xf32>"))
      << body;
  // Without attributes or a sharding, neither is written.
  Builder plain;
  plain.CustomCall("k", {x}, F32({2, 8}));
  EXPECT_FALSE(absl::StrContains(plain.body(), "backend_config")) << plain.body();
  EXPECT_FALSE(absl::StrContains(plain.body(), "mhlo.sharding")) << plain.body();
}

TEST(BuilderTest, CustomCallNamesMustBeIdentifiers) {
  for (const char* target : {"", "has space", "quote\"", "1st"}) {
    Builder b;
    b.CustomCall(target, {}, F32({1}));
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_TRUE(absl::StrContains(b.status().message(), "expected an identifier")) << b.status();
  }
  Builder b;
  b.CustomCall("k", {}, F32({1}), {{"bad name", 1}});
  EXPECT_TRUE(absl::StrContains(b.status().message(), "attribute 'bad name'")) << b.status();
}

}  // namespace
}  // namespace shardrt::stablehlo
