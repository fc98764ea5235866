// The global signature of @main, read from MLIR text as JAX, our tests and the demo write it.
#include "shardrt/program/program_text.h"

#include "shardrt/base/limits.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "program/mlir_bytecode.h"
#include "program/reshard_program.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {


TEST(ProgramSignatureTest, JaxStyleGspmdExport) {
  const char* text = R"(module @jit_f attributes {mhlo.num_partitions = 8 : i32} {
  func.func public @main(%arg0: tensor<16x4xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{devices=[8,1]<=[8]}"} loc("x"), %arg1: tensor<i32> loc("n"))
      -> (tensor<16x4xf32> {jax.result_info = "[0]", mhlo.sharding = "{devices=[8,1]<=[8]}"}, tensor<4xui8>, tensor<2x3xi1>) {
    return %arg0 : tensor<16x4xf32>
  }
})";
  auto sig = ReadProgramSignature(text);
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
  auto sig = ReadProgramSignature(text);
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_TRUE(sig->has_value());
  EXPECT_EQ((*sig)->parameters, (std::vector<ArrayShape>{{ElementType::kBF16, {8, 8}}}));
  EXPECT_EQ((*sig)->results, (std::vector<ArrayShape>{{ElementType::kF64, {8}}}));
}

TEST(ProgramSignatureTest, BytecodeOrNoMainGivesNothing) {
  auto bytecode = ReadProgramSignature(std::string("ML\xefR\x01\x02garbage", 12));
  ASSERT_TRUE(bytecode.ok());
  EXPECT_FALSE(bytecode->has_value());
  auto no_main = ReadProgramSignature("func.func @other(%a: tensor<f32>) -> tensor<f32>");
  ASSERT_TRUE(no_main.ok());
  EXPECT_FALSE(no_main->has_value());
}

TEST(ProgramSignatureTest, DynamicOrUnsupportedTypesAreErrorsNamingTheArgument) {
  auto dynamic = ReadProgramSignature("func.func @main(%a: tensor<?x4xf32>) -> tensor<f32>");
  EXPECT_NE(dynamic.status().message().find(
                "@main argument 0 has a dynamic dimension ('?'); only static shapes are "
                "supported: tensor<?x4xf32>"),
            absl::string_view::npos)
      << dynamic.status();
  auto complex = ReadProgramSignature(
      "func.func @main(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xcomplex<f32>>)");
  EXPECT_NE(complex.status().message().find(
                "@main result 1 has element type 'complex<f32>', which shardrt does not support"),
            absl::string_view::npos)
      << complex.status();
  auto scalar = ReadProgramSignature("func.func @main(%a: i32) -> tensor<f32>");
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
  // The magic, version 6, a producer string that happens to name sdy and mhlo, no sections.
  const std::string bytecode =
      std::string("ML\xefR\x0d", 5) + "sdy.sharding mhlo.num_partitions" + '\0';
  EXPECT_TRUE(IsMlirBytecode(bytecode));
  EXPECT_FALSE(IsMlirBytecode("module {}"));
  auto info = InspectProgram(bytecode);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->is_text);
  EXPECT_TRUE(info->uses_shardy);
  EXPECT_FALSE(info->declared_partitions.has_value());
  EXPECT_FALSE(info->signature.has_value());
}

// Every element type is written with its own MLIR name, and reads back as itself.
TEST(ProgramTextTest, MlirTensorTypesOfEveryElementType) {
  const std::pair<ElementType, const char*> all[] = {
      {ElementType::kPred, "tensor<2x3xi1>"},   {ElementType::kS8, "tensor<2x3xi8>"},
      {ElementType::kS16, "tensor<2x3xi16>"},   {ElementType::kS32, "tensor<2x3xi32>"},
      {ElementType::kS64, "tensor<2x3xi64>"},   {ElementType::kU8, "tensor<2x3xui8>"},
      {ElementType::kU16, "tensor<2x3xui16>"},  {ElementType::kU32, "tensor<2x3xui32>"},
      {ElementType::kU64, "tensor<2x3xui64>"},  {ElementType::kF16, "tensor<2x3xf16>"},
      {ElementType::kF32, "tensor<2x3xf32>"},   {ElementType::kF64, "tensor<2x3xf64>"},
      {ElementType::kBF16, "tensor<2x3xbf16>"},
  };
  for (const auto& [type, text] : all) {
    const ArrayShape shape{type, {2, 3}};
    auto written = MlirTensorType(shape);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*written, text);
    auto sig = ReadProgramSignature(absl::StrCat("func.func @main(%x: ", *written, ") -> ",
                                                 *written));
    ASSERT_TRUE(sig.ok()) << sig.status();
    ASSERT_TRUE(sig->has_value());
    EXPECT_EQ((*sig)->parameters, std::vector<ArrayShape>{shape}) << text;
  }
  EXPECT_EQ(*MlirTensorType({ElementType::kPred, {}}), "tensor<i1>");
  EXPECT_EQ(*MlirTensorType({ElementType::kF32, {0, 5}}), "tensor<0x5xf32>");
}

TEST(ProgramTextTest, TypesThatCannotBeWrittenAreErrors) {
  auto invalid = MlirTensorType({ElementType::kInvalid, {4}});
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.status().message().find("has no MLIR name"), absl::string_view::npos)
      << invalid.status();
  auto unknown = MlirTensorType({static_cast<ElementType>(13), {4}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  auto count = MlirTensorType({ElementType::kF32, {int64_t{1} << 32, int64_t{1} << 32}});
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(count.status().message().find("overflows int64"), absl::string_view::npos)
      << count.status();
  auto bytes = MlirTensorType({ElementType::kF64, {int64_t{1} << 61}});
  EXPECT_NE(bytes.status().message().find("byte size overflows int64"), absl::string_view::npos)
      << bytes.status();
  auto negative = MlirTensorType({ElementType::kF32, {3, -1}});
  EXPECT_NE(negative.status().message().find("is negative"), absl::string_view::npos)
      << negative.status();
  auto rank = MlirTensorType({ElementType::kF32, std::vector<int64_t>(65, 1)});
  EXPECT_NE(rank.status().message().find("rank 65"), absl::string_view::npos) << rank.status();
}

TEST(ProgramTextTest, DeclaredPartitionsAndShardy) {
  EXPECT_EQ(*DeclaredPartitions("module @m attributes {mhlo.num_partitions = 8 : i32} {}"), 8);
  EXPECT_EQ(*DeclaredPartitions("module @m {}"), std::nullopt);
  EXPECT_EQ(*DeclaredPartitions(std::string("ML\xefR\x01", 5)), std::nullopt);
  EXPECT_FALSE(DeclaredPartitions("module @m attributes {mhlo.num_partitions = x} {}").ok());
  EXPECT_TRUE(UsesShardy("module {\n  sdy.mesh @mesh = <[\"x\"=2]>\n}"));
  EXPECT_FALSE(UsesShardy("// sdy.mesh only in a comment\nmodule {}"));
  EXPECT_TRUE(UsesShardy(std::string("ML\xefR\x01sdy.sharding", 17)));
  EXPECT_FALSE(UsesShardy(std::string("ML\xefR\x01mhlo", 9)));
}

TEST(ProgramTextTest, TheReshardProgramReadsBackAsItsOwnSignature) {
  const ArrayShape shape{ElementType::kS16, {10, 6}};
  auto tiled = ParseSharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  auto written = ReshardProgram(shape, Sharding::Replicated(), *tiled, 4);
  ASSERT_TRUE(written.ok()) << written.status();
  const std::string& program = *written;
  auto info = InspectProgram(program);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->declared_partitions, 4);
  EXPECT_EQ(info->declared_replicas, 1);
  EXPECT_FALSE(info->uses_shardy);
  ASSERT_TRUE(info->signature.has_value());
  EXPECT_EQ(info->signature->parameters, std::vector<ArrayShape>{shape});
  EXPECT_EQ(info->signature->results, std::vector<ArrayShape>{shape});
  EXPECT_NE(program.find("mhlo.sharding = \"{replicated}\""), std::string::npos);
  EXPECT_NE(program.find("mhlo.sharding = \"" + PrintSharding(*tiled) + "\""), std::string::npos);
  EXPECT_FALSE(ReshardProgram({ElementType::kInvalid, {2}}, Sharding::Replicated(),
                              Sharding::Replicated(), 4)
                   .ok());
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
    auto sig = ReadProgramSignature(text);
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
  auto too_deep = InspectProgram(deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("nests brackets more than 256 deep at line 1"),
            absl::string_view::npos)
      << too_deep.status();
  auto unclosed = InspectProgram("func.func @main(%x: tensor<2xf32> {a = [[1]");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("is never closed"), absl::string_view::npos)
      << unclosed.status();
  auto string = InspectProgram("func.func @main(%x: tensor<2xf32> {a = \"open");
  EXPECT_FALSE(string.ok());
}

// Nesting the compiler's recursive parser would overflow on (about 10,000 levels) is refused
// before any parser sees it: limits::kMaxProgramNesting levels of brackets pass, one more is an
// error naming the line; brackets in strings and comments do not count.
TEST(ProgramLexerTest, NestingIsBoundedBeforeTheCompilerParsesIt) {
  auto program = [](int64_t levels, const std::string& open, const std::string& close) {
    std::string attr;
    for (int64_t i = 0; i < levels; ++i) attr += open;
    attr += "1";
    for (int64_t i = 0; i < levels; ++i) attr += close;
    return "module @m {\n  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes {a = " +
           attr + "} {\n    return %x : tensor<2xf32>\n  }\n}\n";
  };
  // Three levels are the module's, the function's attributes' and its parameters' brackets
  // closed before: `module {` and `attributes {` are open around the attribute.
  EXPECT_TRUE(InspectProgram(program(limits::kMaxProgramNesting - 2, "[", "]")).ok());
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"[", "]"},
                                    {"{a = ", "}"},
                                    {"(", ")"}}) {
    auto refused = InspectProgram(program(10'000, open, close));
    ASSERT_FALSE(refused.ok()) << open;
    EXPECT_NE(refused.status().message().find("nests brackets more than 256 deep at line 2"),
              absl::string_view::npos)
        << refused.status();
  }
  EXPECT_FALSE(InspectProgram(program(limits::kMaxProgramNesting - 1, "[", "]")).ok());
  // Brackets in a string or a comment are not nesting.
  const std::string quoted = "module @m attributes {s = \"" + std::string(10'000, '[') +
                             "\"} {} // " + std::string(10'000, '{') + "\n";
  EXPECT_TRUE(InspectProgram(quoted).ok()) << InspectProgram(quoted).status();
}

// MLIR bytecode written byte by byte (mlir/docs/BytecodeFormat.md), for the reader of the
// attributes and types it stores in assembly form.
class BytecodeWriter {
 public:
  // A PrefixVarInt: n extra bytes are marked by n trailing zero bits and a one.
  static std::string VarInt(uint64_t v) {
    int extra = 0;
    while (extra < 8 && v >= (uint64_t{1} << (7 * (extra + 1)))) ++extra;
    std::string out;
    if (extra == 8) {
      out.push_back('\0');
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
      return out;
    }
    const uint64_t encoded = ((v << 1) | 1) << extra;
    for (int i = 0; i <= extra; ++i) out.push_back(static_cast<char>(encoded >> (8 * i)));
    return out;
  }
  // An entry of the attribute/type section: `bytes` as they are stored, `custom` when they are
  // a dialect's own encoding (else the assembly form, NUL added here).
  struct Entry {
    std::string bytes;
    bool custom = false;
  };
  // A file with one dialect group of `attrs` and one of `types`, and the given extra sections
  // (id, data) before them.
  static std::string File(const std::vector<Entry>& attrs, const std::vector<Entry>& types,
                          const std::string& extra_sections = "") {
    std::string data, offsets = VarInt(attrs.size()) + VarInt(types.size());
    for (const auto* group : {&attrs, &types}) {
      if (group->empty()) continue;
      offsets += VarInt(0) + VarInt(group->size());
      for (const Entry& e : *group) {
        const std::string stored = e.custom ? e.bytes : e.bytes + std::string(1, '\0');
        offsets += VarInt((stored.size() << 1) | (e.custom ? 1 : 0));
        data += stored;
      }
    }
    return Header() + extra_sections + Section(2, data) + Section(3, offsets);
  }
  static std::string Header() { return std::string("ML\xefR", 4) + VarInt(6) + "test" + '\0'; }
  static std::string Section(int id, const std::string& data) {
    return std::string(1, static_cast<char>(id)) + VarInt(data.size()) + data;
  }
};

std::string Nested(int64_t levels) {
  return std::string(levels, '[') + "1" + std::string(levels, ']');
}

TEST(MlirBytecodeTest, ReadsTheAssemblyFormEntriesAndSkipsCustomOnes) {
  using W = BytecodeWriter;
  // A 2-byte and a 3-byte varint in the sizes, an aligned section with padding before them.
  const std::string long_text = "#d<\"" + std::string(20'000, 'x') + "\">";
  const std::string aligned = std::string(1, static_cast<char>(5 | 0x80)) + W::VarInt(3) +
                              W::VarInt(16);
  std::string extra = aligned;
  while ((W::Header().size() + extra.size()) % 16 != 0) extra += '\xcb';
  extra += "abc";
  // The entries are views into the file: it outlives them.
  const std::string file =
      W::File({{"[1, 2]"}, {"\x01\x02", true}, {long_text}}, {{"!t<i32>"}}, extra);
  auto entries = MlirBytecodeAsmEntries(file);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].text, "[1, 2]");
  EXPECT_EQ((*entries)[0].index, 0);
  EXPECT_EQ((*entries)[1].text, long_text);
  EXPECT_EQ((*entries)[1].index, 2);
  EXPECT_EQ((*entries)[2].text, "!t<i32>");
  EXPECT_EQ((*entries)[2].kind, MlirBytecodeAsmEntry::Kind::kType);
  EXPECT_EQ(W::VarInt(uint64_t{1} << 60).size(), 9u);
  // A file without attributes or types.
  auto none = MlirBytecodeAsmEntries(W::Header());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

// What the compiler's bytecode reader refuses is refused here, with what is wrong.
TEST(MlirBytecodeTest, MalformedFramesAndTablesAreErrors) {
  using W = BytecodeWriter;
  const std::string good = W::File({{"[1]"}}, {});
  struct Case {
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {W::Header() + std::string(1, '\x02') + W::VarInt(100) + "ab", "runs past the end"},
      {W::Header() + std::string(1, '\x0c') + W::VarInt(0), "unknown section id 12"},
      {W::Header() + std::string(1, '\x82') + W::VarInt(0) + W::VarInt(3), "power of two"},
      {W::Header() + std::string(1, '\x82') + W::VarInt(0) + W::VarInt(64) + "zz",
       "expected 0xCB"},
      {std::string("ML\xefR", 4) + W::VarInt(6) + "no nul", "has no NUL"},
      {W::Header() + W::Section(2, "[1") + W::Section(3, W::VarInt(1) + W::VarInt(0) +
                                                             W::VarInt(0) + W::VarInt(1) +
                                                             W::VarInt(3 << 1)),
       "attribute 0 of 3 bytes runs past the end"},
      {W::Header() + W::Section(2, "[1]") + W::Section(3, W::VarInt(1) + W::VarInt(0) +
                                                              W::VarInt(0) + W::VarInt(2)),
       "lists more than 1 attributes"},
      {W::Header() + W::Section(2, "[1]") + W::Section(3, W::VarInt(1) + W::VarInt(0) +
                                                              W::VarInt(0) + W::VarInt(1) +
                                                              W::VarInt(3 << 1)),
       "attribute 0 has no NUL"},
      {good.substr(0, good.size() - 1), "runs past the end"},
  };
  for (const Case& c : cases) {
    auto r = MlirBytecodeAsmEntries(c.bytes);
    ASSERT_FALSE(r.ok()) << c.expected;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), absl::string_view::npos) << r.status();
  }
  // Every prefix cut inside the offset section (the last) fails too, without reading past it.
  const size_t offsets_start =
      W::Header().size() + W::Section(2, std::string("[1]\0", 4)).size();
  for (size_t n = offsets_start + 1; n < good.size(); ++n) {
    EXPECT_FALSE(MlirBytecodeAsmEntries(good.substr(0, n)).ok()) << n;
  }
  EXPECT_TRUE(MlirBytecodeAsmEntries(good).ok());
}

// An attribute or type that bytecode stores in assembly form is parsed by the compiler's
// recursive text parser: InspectProgram bounds its nesting as it bounds a text program's.
TEST(MlirBytecodeTest, NestingOfAssemblyFormEntriesIsBounded) {
  using W = BytecodeWriter;
  EXPECT_TRUE(InspectProgram(W::File({{Nested(limits::kMaxProgramNesting)}}, {})).ok());
  auto attr = InspectProgram(W::File({{"[1]"}, {Nested(10'000)}}, {}));
  ASSERT_FALSE(attr.ok());
  EXPECT_NE(attr.status().message().find(
                "the bytecode's attribute 1 (in assembly form) nests brackets more than 256"),
            absl::string_view::npos)
      << attr.status();
  auto type = InspectProgram(
      W::File({}, {{"!d<" + Nested(limits::kMaxProgramNesting) + ">"}}));
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("the bytecode's type 0"), absl::string_view::npos)
      << type.status();
  // A dialect's own encoding is not text: brackets in it are bytes, not nesting.
  EXPECT_TRUE(InspectProgram(W::File({{std::string(10'000, '['), true}}, {})).ok());
  // A malformed file is refused before the compiler reads it.
  EXPECT_FALSE(InspectProgram(W::Header() + std::string(1, '\x0c') + W::VarInt(0)).ok());
}

}  // namespace
}  // namespace shardrt
