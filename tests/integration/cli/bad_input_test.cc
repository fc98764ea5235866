// Bad and unusual input through the CLI binary: each gets a clean error (exit 1, one line on
// stderr naming what, where, expected and got) or the right answer, never a crash. The cases
// are those of docs/errors.md.
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "cli/npy.h"
#include "cli/cli_runner.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using testing::CliResult;
using testing::ExpectCleanError;
using testing::MakeTempDir;
using testing::RunCliCaptured;

const std::string kUneven = std::string(SHARDRT_TESTDATA_DIR) + "/uneven_two_outputs.mlir";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// An f32 array with x[i] = i * 0.5 - 2 (every row different, so sums see every row).
NpyArray F32(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  NpyArray a{ElementType::kF32, std::move(shape), std::vector<uint8_t>(n * 4)};
  float* v = reinterpret_cast<float*>(a.data.data());
  for (int64_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 2.0f;
  return a;
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_TRUE(WriteNpy(dir_ + "/x10x3.npy", F32({10, 3})).ok());
    ASSERT_TRUE(WriteNpy(dir_ + "/x12x3.npy", F32({12, 3})).ok());
    ASSERT_TRUE(WriteNpy(dir_ + "/x16x4.npy", F32({16, 4})).ok());
    ASSERT_TRUE(WriteNpy(dir_ + "/scalar.npy", F32({})).ok());
  }
  std::string dir_;
};

// The column sums of F32({10, 3}): sum over rows r of (0.5 * (3r + c) - 2).
float ColumnSum10x3(int c) {
  float s = 0;
  for (int r = 0; r < 10; ++r) s += 0.5f * static_cast<float>(3 * r + c) - 2.0f;
  return s;
}

TEST_F(BadInputTest, ManualSubgroupArgumentShardingIsRefused) {  // D1
  ExpectCleanError("run " + kUneven + " --devices 4 --arg '" + dir_ +
                       "/x10x3.npy@{devices=[2,1,2]<=[4] last_tile_dims={manual}}'",
                   "argument 0 (" + dir_ + "/x10x3.npy) sharding: data cannot have a manual "
                   "sharding or manual subgroups, got {devices=[2,1,2]<=[4] "
                   "last_tile_dims={manual}}");
}

TEST_F(BadInputTest, HugeDeclaredCountsAndLongSpaceRunsAreLinear) {  // D2
  WriteText(dir_ + "/digits.mlir", "module @m attributes {mhlo.num_partitions = " +
                                       std::string(50'000, '9') + " : i32} {}");
  ExpectCleanError("run " + dir_ + "/digits.mlir --devices 1",
                   "the program declares mhlo.num_partitions = '9999");
  // A million spaces before the '=' of a valid program: it runs, with the right answer.
  std::string text = ReadText(kUneven);
  const size_t at = text.find("mhlo.num_partitions") + std::string("mhlo.num_partitions").size();
  text.insert(at, std::string(1'000'000, ' '));
  WriteText(dir_ + "/spaces.mlir", text);
  CliResult r = RunCliCaptured("run " + dir_ + "/spaces.mlir --devices 4 --arg " + dir_ +
                               "/x10x3.npy --out " + dir_ + "/spaces_out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = ReadNpy(dir_ + "/spaces_out/output_1.npy");
  ASSERT_TRUE(s.ok()) << s.status();
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(reinterpret_cast<float*>(s->data.data())[c],
                                              ColumnSum10x3(c));
}

// An attribute nested 10,000 levels deep (a 20 KB file) crashed the plugin's recursive parser
// (SIGSEGV); it is refused before the plugin sees it, in text of any bracket kind. 200 levels
// (a constant of that depth is no valid program, so an attribute) still reach the compiler.
TEST_F(BadInputTest, DeeplyNestedProgramsAreRefusedNotACrash) {  // R1
  auto program = [](int levels, const std::string& open, const std::string& close) {
    std::string attr;
    for (int i = 0; i < levels; ++i) attr += open;
    attr += "1";
    for (int i = 0; i < levels; ++i) attr += close;
    return "module @m {\n  func.func public @main(%x: tensor<f32>) -> tensor<f32> "
           "attributes {deep = " + attr + "} {\n    return %x : tensor<f32>\n  }\n}\n";
  };
  WriteText(dir_ + "/brackets.mlir", program(10'000, "[", "]"));
  ExpectCleanError("run " + dir_ + "/brackets.mlir --devices 1 --arg " + dir_ + "/scalar.npy",
                   "the program nests brackets more than 256 deep at line 2");
  WriteText(dir_ + "/dicts.mlir", program(10'000, "{a = ", "}"));
  ExpectCleanError("run " + dir_ + "/dicts.mlir --devices 1 --arg " + dir_ + "/scalar.npy",
                   "the program nests brackets more than 256 deep at line 2");
  WriteText(dir_ + "/shallow.mlir", program(200, "[", "]"));
  CliResult r = RunCliCaptured("run " + dir_ + "/shallow.mlir --devices 1 --arg " + dir_ +
                               "/scalar.npy --out " + dir_ + "/shallow_out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = ReadNpy(dir_ + "/shallow_out/output_0.npy");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(reinterpret_cast<float*>(out->data.data())[0], -2.0f);  // F32({}) is -2
}

TEST_F(BadInputTest, ShapesThatOverflowAreRefusedBeforeCompiling) {  // D4
  WriteText(dir_ + "/param.mlir",
            "module @m {\n  func.func public @main(%x: tensor<4294967296x4294967296xf32>) -> "
            "tensor<f32> {\n    %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
            "    return %c : tensor<f32>\n  }\n}\n");
  ExpectCleanError("run " + dir_ + "/param.mlir --devices 1",
                   "@main argument 0 at line 2: the element count of "
                   "tensor<4294967296x4294967296xf32>");
  WriteText(dir_ + "/iota.mlir",
            "module @m {\n  func.func public @main(%x: tensor<f32>) -> tensor<f32> {\n"
            "    %i = stablehlo.iota dim = 0 : tensor<4294967296x4294967296xf32>\n"
            "    return %x : tensor<f32>\n  }\n}\n");
  ExpectCleanError("run " + dir_ + "/iota.mlir --devices 1 --arg " + dir_ + "/scalar.npy",
                   "a tensor type at line 3: the element count of");
}

TEST_F(BadInputTest, ProgramFilesAreRegularAndBounded) {  // D5
  ExpectCleanError("run /dev/zero --devices 1",
                   "'/dev/zero' is not a regular file; expected a program file");
  ExpectCleanError("run " + dir_ + " --devices 1",
                   "'" + dir_ + "' is a directory; expected a program file");
  ExpectCleanError("run " + kUneven + " --devices 4 --arg /dev/zero",
                   "/dev/zero: expected a regular file, got a character device");
  WriteText(dir_ + "/empty.mlir", "");
  ExpectCleanError("run " + dir_ + "/empty.mlir --devices 1", "is empty; expected a program");
}

TEST_F(BadInputTest, AnEmptyOutFolderIsRefused) {  // D6
  ExpectCleanError("run " + kUneven + " --devices 4 --arg " + dir_ + "/x10x3.npy --out ''",
                   "--out: expected a folder for the outputs, got ''");
  ExpectCleanError("run " + kUneven + " --devices 4 --arg " + dir_ + "/x10x3.npy --out=",
                   "--out: expected a folder for the outputs, got ''");
  WriteText(dir_ + "/a_file", "x");
  ExpectCleanError("run " + kUneven + " --devices 4 --arg " + dir_ + "/x10x3.npy --out " +
                       dir_ + "/a_file",
                   "exists and is not a folder");
}

TEST_F(BadInputTest, MainIsFoundAsMlirWritesIt) {  // W1, W2
  std::string text = ReadText(kUneven);
  text.replace(text.find("@main("), 6, "@main (");
  text = "// func.func public @main(%y: tensor<12x3xf32>)\n// mhlo.num_partitions = 2\n" + text;
  WriteText(dir_ + "/w1.mlir", text);
  CliResult r = RunCliCaptured("run " + dir_ + "/w1.mlir --devices 4 --arg " + dir_ +
                               "/x10x3.npy --out " + dir_ + "/w1_out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = ReadNpy(dir_ + "/w1_out/output_1.npy");
  ASSERT_TRUE(s.ok()) << s.status();
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(reinterpret_cast<float*>(s->data.data())[c],
                                              ColumnSum10x3(c));
  ExpectCleanError("run " + dir_ + "/w1.mlir --devices 4 --arg " + dir_ + "/x12x3.npy",
                   "argument 0 (" + dir_ + "/x12x3.npy): expected f32[10,3], got f32[12,3]");
}

TEST_F(BadInputTest, BytecodeNeedsTheGlobalShapesOfSplitResults) {  // W1 (bytecode)
  const std::string program = std::string(SHARDRT_TESTDATA_DIR) + "/scale_sum_jax.mlirbc";
  ExpectCleanError("run " + program + " --devices 8 --arg " + dir_ + "/x16x4.npy",
                   "does not tell it exactly (splits may be uneven)");
  CliResult r = RunCliCaptured("run " + program + " --devices 8 --arg " + dir_ +
                               "/x16x4.npy --result-shape 'f32[16,4]' --result-shape 'f32[4]' "
                               "--out " + dir_ + "/bc_out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto y = ReadNpy(dir_ + "/bc_out/output_0.npy");
  ASSERT_TRUE(y.ok()) << y.status();
  const float* yv = reinterpret_cast<const float*>(y->data.data());
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(yv[i], 2 * (0.5f * i - 2.0f) + 1);
  ExpectCleanError("run " + kUneven + " --devices 4 --arg " + dir_ +
                       "/x10x3.npy --result-shape 'f32[3]'",
                   "--result-shape is for MLIR bytecode programs");
}

TEST_F(BadInputTest, MinorCases) {
  // Too many devices is refused at once (the plugin would take minutes).
  ExpectCleanError("devices --devices 4096", "expected an integer in [1, 1024], got '4096'");
  // An argument path may contain '@'.
  const std::string at_dir = dir_ + "/a@b";
  ASSERT_EQ(mkdir(at_dir.c_str(), 0755), 0);
  ASSERT_TRUE(WriteNpy(at_dir + "/x.npy", F32({10, 3})).ok());
  CliResult r = RunCliCaptured("run " + kUneven + " --devices 4 --arg '" + at_dir +
                               "/x.npy@{replicated}'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A complex result is named as such.
  WriteText(dir_ + "/complex.mlir",
            "func.func @main(%x: tensor<4xf32>) -> tensor<4xcomplex<f32>> {\n"
            "  %0 = stablehlo.complex %x, %x : tensor<4xcomplex<f32>>\n"
            "  return %0 : tensor<4xcomplex<f32>>\n}\n");
  ExpectCleanError("run " + dir_ + "/complex.mlir --devices 1",
                   "@main result 0 has element type 'complex<f32>', which shardrt does not "
                   "support");
  // On one device {maximal device=0} is the whole array, as {replicated} is; device 1 is not.
  WriteText(dir_ + "/double.mlir",
            "func.func @main(%x: tensor<10x3xf32>) -> tensor<10x3xf32> {\n"
            "  %0 = stablehlo.add %x, %x : tensor<10x3xf32>\n  return %0 : tensor<10x3xf32>\n}\n");
  r = RunCliCaptured("run " + dir_ + "/double.mlir --devices 1 --arg '" + dir_ +
                     "/x10x3.npy@{maximal device=0}'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanError("run " + dir_ + "/double.mlir --devices 1 --arg '" + dir_ +
                       "/x10x3.npy@{maximal device=1}'",
                   "sharding: maximal device 1 out of range [0, 1)");
  // shard-info: a rank far beyond any array.
  std::string shape = "1";
  for (int i = 0; i < 5000; ++i) shape += ",1";
  ExpectCleanError("shard-info --shape " + shape + " --sharding '{replicated}' --devices 2",
                   "more than 64 dimensions");
}


TEST_F(BadInputTest, AProgramThatNeverFinishesEndsAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  ExpectCleanError("run " + std::string(SHARDRT_TESTDATA_DIR) + "/never_ends.mlir --devices 8 --arg " +
                       dir_ + "/scalar.npy --timeout 2",
                   "shardrt run: timed out after 2 s (--timeout); stopped");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  ExpectCleanError("run " + kUneven + " --timeout=0", "flag --timeout: expected a whole number");
}


// The CLI's uploads and downloads keep every row where it belongs: a position-dependent
// program, with the program's sharding and with an argument sharding resharded on device.
TEST_F(BadInputTest, PositionDependentResultsThroughTheCli) {
  ASSERT_TRUE(WriteNpy(dir_ + "/x18x4.npy", F32({18, 4})).ok());
  const std::string program = std::string(SHARDRT_TESTDATA_DIR) + "/position_weighted.mlir";
  for (const std::string sharding : {"", "@{devices=[2,4]<=[8]}"}) {
    SCOPED_TRACE(sharding);
    const std::string out = dir_ + "/pos_out" + std::to_string(sharding.size());
    CliResult r = RunCliCaptured("run " + program + " --devices 8 --arg '" + dir_ +
                                 "/x18x4.npy" + sharding + "' --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto y = ReadNpy(out + "/output_0.npy");
    auto s = ReadNpy(out + "/output_1.npy");
    ASSERT_TRUE(y.ok() && s.ok());
    const float* yv = reinterpret_cast<const float*>(y->data.data());
    const float* sv = reinterpret_cast<const float*>(s->data.data());
    for (int i = 0; i < 72; ++i) {
      EXPECT_FLOAT_EQ(yv[i], (0.5f * static_cast<float>(i) - 2.0f) * static_cast<float>(i / 4 + 1));
    }
    for (int c = 0; c < 4; ++c) {
      double e = 0;
      for (int r = 0; r < 18; ++r) e += (0.5 * (4 * r + c) - 2.0) * (r + 1);
      EXPECT_NEAR(sv[c], e, 1e-3);
    }
  }
}

}  // namespace
}  // namespace shardrt::cli
