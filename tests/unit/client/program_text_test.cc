// The global signature of @main, read from MLIR text as JAX, our tests and the demo write it.
#include "client/program_text.h"

#include "gtest/gtest.h"

namespace shardrt {
namespace {


TEST(ProgramSignatureTest, JaxStyleGspmdExport) {
  const char* text = R"(module @jit_f attributes {mhlo.num_partitions = 8 : i32} {
  func.func public @main(%arg0: tensor<16x4xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{devices=[8,1]<=[8]}"} loc("x"), %arg1: tensor<i32> loc("n"))
      -> (tensor<16x4xf32> {jax.result_info = "[0]", mhlo.sharding = "{devices=[8,1]<=[8]}"}, tensor<4xui8>, tensor<2x3xi1>) {
    return %arg0 : tensor<16x4xf32>
  }
})";
  auto sig = ParseProgramSignature(text);
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_TRUE(sig->has_value());
  EXPECT_EQ((*sig)->parameters,
            (std::vector<ArrayShape>{{ElementType::kF32, {16, 4}}, {ElementType::kS32, {}}}));
  EXPECT_EQ((*sig)->results, (std::vector<ArrayShape>{{ElementType::kF32, {16, 4}},
                                                      {ElementType::kU8, {4}},
                                                      {ElementType::kPred, {2, 3}}}));
}

TEST(ProgramSignatureTest, ShardyAttributesAndASingleUnparenthesizedResult) {
  const char* text = R"(module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%a: tensor<8x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y", ?}]>}) -> tensor<8xf64> {
    return %r : tensor<8xf64>
  }
})";
  auto sig = ParseProgramSignature(text);
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_TRUE(sig->has_value());
  EXPECT_EQ((*sig)->parameters, (std::vector<ArrayShape>{{ElementType::kBF16, {8, 8}}}));
  EXPECT_EQ((*sig)->results, (std::vector<ArrayShape>{{ElementType::kF64, {8}}}));
}

TEST(ProgramSignatureTest, BytecodeOrNoMainGivesNothing) {
  auto bytecode = ParseProgramSignature(std::string("ML\xefR\x01\x02garbage", 12));
  ASSERT_TRUE(bytecode.ok());
  EXPECT_FALSE(bytecode->has_value());
  auto no_main = ParseProgramSignature("func.func @other(%a: tensor<f32>) -> tensor<f32>");
  ASSERT_TRUE(no_main.ok());
  EXPECT_FALSE(no_main->has_value());
}

TEST(ProgramSignatureTest, DynamicOrUnsupportedTypesAreErrorsNamingTheArgument) {
  auto dynamic = ParseProgramSignature("func.func @main(%a: tensor<?x4xf32>) -> tensor<f32>");
  EXPECT_NE(dynamic.status().message().find("@main argument 0: dimension '?' is not static"),
            absl::string_view::npos)
      << dynamic.status();
  auto complex = ParseProgramSignature(
      "func.func @main(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xcomplex<f32>>)");
  EXPECT_NE(complex.status().message().find("@main result 1"), absl::string_view::npos)
      << complex.status();
}

}  // namespace
}  // namespace shardrt
