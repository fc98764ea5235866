// The global signature of @main, read from MLIR text as JAX, our tests and the demo write it.
#include "client/program_text.h"

#include <string>

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
  EXPECT_NE(dynamic.status().message().find(
                "@main argument 0 has a dynamic dimension ('?'); only static shapes are "
                "supported: tensor<?x4xf32>"),
            absl::string_view::npos)
      << dynamic.status();
  auto complex = ParseProgramSignature(
      "func.func @main(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xcomplex<f32>>)");
  EXPECT_NE(complex.status().message().find(
                "@main result 1 has element type 'complex<f32>', which shardrt does not support"),
            absl::string_view::npos)
      << complex.status();
  auto scalar = ParseProgramSignature("func.func @main(%a: i32) -> tensor<f32>");
  EXPECT_NE(scalar.status().message().find("@main argument 0 at line 1: expected a tensor type"),
            absl::string_view::npos)
      << scalar.status();
}

}  // namespace
}  // namespace shardrt

namespace shardrt {
namespace {

TEST(InspectProgramTest, DeclaredCountsShardyAndSignature) {
  const char* text = R"(// mhlo.num_partitions = 2 in a comment is not a declaration
module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%x: tensor<10x3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.slice %x [0:1, 0:3] : (tensor<10x3xf32>) -> tensor<1x3xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
})";
  auto info = InspectProgram(text);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->is_text);
  EXPECT_EQ(info->declared_partitions, 4);
  EXPECT_EQ(info->declared_replicas, 1);
  EXPECT_TRUE(info->uses_shardy);
  ASSERT_TRUE(info->signature.has_value());
  EXPECT_EQ(info->signature->parameters,
            (std::vector<ArrayShape>{{ElementType::kF32, {10, 3}}}));
}

TEST(InspectProgramTest, NothingDeclaredAndNoShardy) {
  auto info = InspectProgram(R"(module {
  // sdy.mesh only in a comment
  func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> { return %x : tensor<2xi32> }
})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->declared_partitions.has_value());
  EXPECT_FALSE(info->declared_replicas.has_value());
  EXPECT_FALSE(info->uses_shardy);
}

TEST(InspectProgramTest, ACountThatDoesNotFitIsAnError) {
  const std::string text = "module @m attributes {mhlo.num_partitions = " +
                           std::string(50'000, '9') + " : i32} {}";
  auto info = InspectProgram(text);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(info.status().message().find("expected a number that fits in int64"),
            absl::string_view::npos)
      << info.status();
  EXPECT_LT(info.status().message().size(), 200u);
}

TEST(InspectProgramTest, BytecodeIsNotReadAsText) {
  const std::string bytecode = std::string("ML\xefR", 4) + "\x01sdy.sharding mhlo.num_partitions";
  EXPECT_TRUE(IsMlirBytecode(bytecode));
  EXPECT_FALSE(IsMlirBytecode("module {}"));
  auto info = InspectProgram(bytecode);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->is_text);
  EXPECT_TRUE(info->uses_shardy);
  EXPECT_FALSE(info->declared_partitions.has_value());
  EXPECT_FALSE(info->signature.has_value());
}

TEST(ProgramTextTest, MlirTensorTypes) {
  EXPECT_EQ(MlirTensorType({ElementType::kF32, {10, 3}}), "tensor<10x3xf32>");
  EXPECT_EQ(MlirTensorType({ElementType::kS32, {4}}), "tensor<4xi32>");
  EXPECT_EQ(MlirTensorType({ElementType::kU8, {2, 2}}), "tensor<2x2xui8>");
  EXPECT_EQ(MlirTensorType({ElementType::kPred, {}}), "tensor<i1>");
  EXPECT_EQ(MlirTensorType({ElementType::kBF16, {7}}), "tensor<7xbf16>");
}

TEST(ProgramTextTest, TheReshardProgramReadsBackAsItsOwnSignature) {
  const ArrayShape shape{ElementType::kS16, {10, 6}};
  const std::string program =
      ReshardProgram(shape, Sharding::Replicated(), Sharding::Replicated(), 4);
  auto info = InspectProgram(program);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->declared_partitions, 4);
  EXPECT_EQ(info->declared_replicas, 1);
  EXPECT_FALSE(info->uses_shardy);
  ASSERT_TRUE(info->signature.has_value());
  EXPECT_EQ(info->signature->parameters, std::vector<ArrayShape>{shape});
  EXPECT_EQ(info->signature->results, std::vector<ArrayShape>{shape});
  EXPECT_NE(program.find("mhlo.sharding = \"{replicated}\""), std::string::npos);
}

}  // namespace
}  // namespace shardrt

namespace shardrt {
namespace {

const std::vector<ArrayShape> kUneven = {{ElementType::kF32, {10, 3}}};

// @main is found as MLIR allows it to be written, and text that only looks like it is not.
TEST(ProgramLexerTest, MainIsFoundWhereverMlirAllowsIt) {
  const char* forms[] = {
      // a space before the parenthesis, and an `@main(` in a comment before the real one
      "// func.func @main(%y: tensor<12x3xf32>)\n"
      "func.func public @main (%x: tensor<10x3xf32>) -> (tensor<3xf32>) { }",
      // the quoted symbol form, no visibility, line breaks everywhere
      "func.func\n  @\"main\"\n(\n%x\n:\ntensor<10x3xf32>\n)\n->\ntensor<3xf32>",
      // `@main(` inside a string attribute of an earlier function
      "func.func private @helper(%a: tensor<2xf32> {x.doc = \"@main(%z: tensor<12x3xf32>)\"})"
      " -> tensor<2xf32>\nfunc.func @main(%x: tensor<10x3xf32> loc(\"x\")) -> tensor<3xf32>",
  };
  for (const char* text : forms) {
    auto sig = ParseProgramSignature(text);
    ASSERT_TRUE(sig.ok()) << sig.status() << "\n" << text;
    ASSERT_TRUE(sig->has_value()) << text;
    EXPECT_EQ((*sig)->parameters, kUneven) << text;
    EXPECT_EQ((*sig)->results, (std::vector<ArrayShape>{{ElementType::kF32, {3}}})) << text;
  }
}

// Shapes whose element count or byte size overflows int64 are refused before any compiler
// sees them, in the signature and in the body (e.g. an iota).
TEST(ProgramLexerTest, OverflowingTensorTypesAreErrors) {
  auto param = InspectProgram(
      "func.func @main(%x: tensor<4294967296x4294967296xf32>) -> tensor<f32>");
  ASSERT_FALSE(param.ok());
  EXPECT_NE(param.status().message().find("overflows int64"), absl::string_view::npos)
      << param.status();
  auto body = InspectProgram(R"(func.func @main(%x: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.iota dim = 0 : tensor<4294967296x4294967296xf32>
    return %x : tensor<f32>
  })");
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("a tensor type at line 2"), absl::string_view::npos)
      << body.status();
  auto bytes = InspectProgram("func.func @main(%x: tensor<2305843009213693952xf64>) -> tensor<f32>");
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("has more bytes than fit in int64"),
            absl::string_view::npos)
      << bytes.status();
  auto huge = InspectProgram("func.func @main(%x: tensor<1099511627776xf32>) -> tensor<f32>");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("is larger than the limit of"), absl::string_view::npos)
      << huge.status();
}

// Long runs of digits or spaces cost linear time and no stack; unterminated brackets and
// strings are clean errors.
TEST(ProgramLexerTest, PathologicalTextIsLinearAndClean) {
  const std::string spaces = "module @m attributes {mhlo.num_partitions" +
                             std::string(1'000'000, ' ') + "= 4 : i32} {}";
  auto info = InspectProgram(spaces);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->declared_partitions, 4);
  const std::string deep = "func.func @main(%x: tensor<2xf32> {a = " + std::string(200'000, '[');
  auto unclosed = InspectProgram(deep);
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("is never closed"), absl::string_view::npos)
      << unclosed.status();
  auto string = InspectProgram("func.func @main(%x: tensor<2xf32> {a = \"open");
  EXPECT_FALSE(string.ok());
}

}  // namespace
}  // namespace shardrt
