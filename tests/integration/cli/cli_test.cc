// The CLI binary end to end: `shardrt run` on .npy files and `shardrt devices --json`, checked
// against host computations; bad input exits non-zero with one line on stderr; `run --out`
// never writes through a symbolic link it finds in the folder.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "cli/deadline_runner.h"
#include "cli/npy.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs the CLI with `args`; stdout (and stderr after it when `merge`).
Result RunCli(const std::string& args, bool merge = false) {
  testing::CliResult r = testing::RunCliCaptured(args);
  return {r.exit_code, merge ? r.out + r.err : r.out};
}

std::string TempDir() { return testing::MakeTempDir(); }

TEST(CliTest, DevicesJsonListsEightDevices) {
  Result r = RunCli("devices --devices 8 --json");
  ASSERT_EQ(r.exit_code, 0);
  size_t count = 0;
  for (size_t pos = 0; (pos = r.out.find("\"kind\": \"cpu\"", pos)) != std::string::npos; ++pos) ++count;
  EXPECT_EQ(count, 8u) << r.out;
  EXPECT_NE(r.out.find("\"id\": 7"), std::string::npos);
  EXPECT_NE(r.out.find("\"process_index\": 0"), std::string::npos);
}

// The column sums of `x` (f32[rows, cols], row-major), computed on the host.
std::vector<float> HostColumnSums(const float* x, int rows, int cols) {
  std::vector<float> sums(cols, 0.0f);
  for (int row = 0; row < rows; ++row) {
    for (int c = 0; c < cols; ++c) sums[c] += x[row * cols + c];
  }
  return sums;
}

// Expects the .npy file at `path` to hold f32[`shape`] with `expected`'s values (from the host),
// each within `tolerance`.
void ExpectNpyNear(const std::string& path, const std::vector<int64_t>& shape,
                   const std::vector<float>& expected, float tolerance) {
  SCOPED_TRACE(path);
  auto array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->type, ElementType::kF32);
  ASSERT_EQ(array->shape, shape);
  ASSERT_EQ(array->data.size(), expected.size() * sizeof(float));
  const float* values = reinterpret_cast<const float*>(array->data.data());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(values[i], expected[i], tolerance) << "element " << i;
  }
}

// uneven_two_outputs.mlir on 4 devices, with the program's argument sharding and with another
// one (resharded on device): both runs write y = 2x + 1 and the column sums of x, computed here
// from x.
TEST(CliTest, RunWritesGlobalOutputsThatMatchTheHost) {
  const std::string dir = TempDir();
  NpyArray x{ElementType::kF32, {10, 3}, std::vector<uint8_t>(120)};
  float* xv = reinterpret_cast<float*>(x.data.data());
  for (int i = 0; i < 30; ++i) xv[i] = 0.25f * i - 3.0f;
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  std::vector<float> host_y(30);
  for (int i = 0; i < 30; ++i) host_y[i] = 2 * xv[i] + 1;  // exact in f32
  const std::vector<float> host_s = HostColumnSums(xv, 10, 3);
  Result r = RunCli("run " SHARDRT_TESTDATA_DIR "/uneven_two_outputs.mlir --devices 4 --arg " +
                    dir + "/x.npy --out " + dir + "/out --repeat 3 --metrics");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Metric: ExecuteReplicatedTime"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  TotalSamples: 3"), std::string::npos) << r.out;
  ExpectNpyNear(dir + "/out/output_0.npy", {10, 3}, host_y, 0);
  ExpectNpyNear(dir + "/out/output_1.npy", {3}, host_s, 1e-4);
  // An explicit argument sharding differing from the program's is resharded on device.
  Result resharded = RunCli("run " SHARDRT_TESTDATA_DIR "/uneven_two_outputs.mlir --devices 4 "
                            "--arg '" + dir + "/x.npy@{devices=[2,2]<=[4]}' --out " + dir + "/out2");
  ASSERT_EQ(resharded.exit_code, 0) << resharded.out;
  ExpectNpyNear(dir + "/out2/output_0.npy", {10, 3}, host_y, 0);
  ExpectNpyNear(dir + "/out2/output_1.npy", {3}, host_s, 1e-4);
}

// The plugin's own log lines (the XLA CPU plugin's "All log messages before
// absl::InitializeLog()", its device-count line and the GSPMD deprecation warning of every
// compile) stay off stderr by default, with the environment left as it is; $SHARDRT_LOG=info
// asks for them, $SHARDRT_LOG=warning for the warnings only, $SHARDRT_LOG=plugin leaves the
// plugin to read TF_CPP_MIN_LOG_LEVEL; a bad $SHARDRT_LOG is one line.
TEST(CliTest, ThePluginsLogLinesStayOffStderrUnlessAsked) {
  const std::string dir = TempDir();
  NpyArray x{ElementType::kF32, {16, 4}, std::vector<uint8_t>(256)};
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  const std::string run = " " SHARDRT_CLI_PATH " run " SHARDRT_TESTDATA_DIR
                          "/executor_scale_f32.mlir --devices 8 --compile-cache off --arg " +
                          dir + "/x.npy";
  auto run_with = [&](const std::string& env) {
    return testing::RunShellWithDeadline("env -u TF_CPP_MIN_LOG_LEVEL -u SHARDRT_LOG " + env,
                                         run, testing::kCliDeadline);
  };
  constexpr char kDeviceCountLine[] = "cpu_device_count set via create_options: 8";
  constexpr char kGspmdWarning[] = "GSPMD sharding propagation is going to be deprecated";
  constexpr char kBeforeInitializeLog[] = "All log messages before absl::InitializeLog()";

  testing::TimedResult quiet = run_with("");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_NE(quiet.out.find("output 0: f32[16,4]"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.err, "");

  testing::TimedResult info = run_with("SHARDRT_LOG=info");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.err.find(kBeforeInitializeLog), std::string::npos) << info.err;
  EXPECT_NE(info.err.find(kDeviceCountLine), std::string::npos) << info.err;
  EXPECT_NE(info.err.find(kGspmdWarning), std::string::npos) << info.err;

  testing::TimedResult warnings = run_with("SHARDRT_LOG=warning");
  ASSERT_EQ(warnings.exit_code, 0) << warnings.err;
  EXPECT_EQ(warnings.err.find(kDeviceCountLine), std::string::npos) << warnings.err;
  EXPECT_NE(warnings.err.find(kGspmdWarning), std::string::npos) << warnings.err;

  testing::TimedResult application = run_with("TF_CPP_MIN_LOG_LEVEL=0");
  ASSERT_EQ(application.exit_code, 0) << application.err;
  EXPECT_EQ(application.err, "");
  testing::TimedResult plugin = run_with("TF_CPP_MIN_LOG_LEVEL=0 SHARDRT_LOG=plugin");
  ASSERT_EQ(plugin.exit_code, 0) << plugin.err;
  EXPECT_NE(plugin.err.find(kDeviceCountLine), std::string::npos) << plugin.err;

  testing::TimedResult bad = run_with("SHARDRT_LOG=loud");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err,
            "shardrt run: $SHARDRT_LOG: expected info, warning, error or plugin, got 'loud'\n");
}

TEST(CliTest, BadInputIsOneLineOnStderrAndNonZeroExit) {
  const std::string dir = TempDir();
  NpyArray wrong{ElementType::kF64, {10, 3}, std::vector<uint8_t>(240)};
  ASSERT_TRUE(WriteNpy(dir + "/wrong.npy", wrong).ok());
  const std::string program = SHARDRT_TESTDATA_DIR "/uneven_two_outputs.mlir";
  struct Case {
    std::string args;
    std::string expected;
  } cases[] = {
      {"run " + program + " --devices 4 --arg " + dir + "/wrong.npy",
       "argument 0 (" + dir + "/wrong.npy): expected f32[10,3], got f64[10,3]"},
      {"run " + program + " --devices 4", "takes 1 arguments, got 0 --arg"},
      {"run " + program + " --devices 8 --arg " + dir + "/wrong.npy",
       "declares mhlo.num_partitions = 4 but is compiled for 8 partitions"},
      {"run " + program + " --devices 4 --arg " + dir + "/missing.npy", "missing.npy"},
      {"run /nonexistent.mlir --devices 4", "cannot read '/nonexistent.mlir'"},
      {"devices --plugin /nonexistent.so",
       "no PJRT plugin found; tried the explicit plugin path '/nonexistent.so' (no such file)"},
      {"devices --bogus", "unknown flag --bogus"},
  };
  for (const Case& c : cases) {
    Result r = RunCli(c.args, /*merge=*/true);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << "\n" << r.out;
  }
}

TEST(CliTest, RunCompilesShardyAnnotatedProgramsWithShardy) {
  const std::string dir = TempDir();
  NpyArray x{ElementType::kF32, {16, 4}, std::vector<uint8_t>(256)};
  float* xv = reinterpret_cast<float*>(x.data.data());
  for (int i = 0; i < 64; ++i) xv[i] = static_cast<float>(i % 7) - 2.5f;
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  Result r = RunCli("run " SHARDRT_TESTDATA_DIR "/shardy_row_sum.mlir --devices 8 --arg " + dir +
                    "/x.npy --out " + dir + "/");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // A folder given with a trailing slash is printed with one slash before the file.
  EXPECT_NE(r.out.find(" -> " + dir + "/output_1.npy\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
  // The shardings XLA settled on, read back from the executable.
  EXPECT_NE(r.out.find("output 0: f32[16,4] {devices=[8,1]<=[8]}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output 1: f32[4] {replicated}"), std::string::npos) << r.out;
  // y = 2x and the column sums of x, computed here from x.
  std::vector<float> host_y(64);
  for (int i = 0; i < 64; ++i) host_y[i] = 2 * xv[i];
  ExpectNpyNear(dir + "/output_0.npy", {16, 4}, host_y, 0);
  ExpectNpyNear(dir + "/output_1.npy", {4}, HostColumnSums(xv, 16, 4), 1e-4);
}

// A symbolic link already in the --out folder, `DIR/output_0.npy -> ../precious.txt`: the run
// refuses to replace it, in one line, and the file outside the folder is unchanged (before, the
// output was written through the link over it). A regular file there is replaced whole, and no
// temporary file is left behind.
TEST(CliTest, RunOutNeverWritesThroughASymbolicLink) {
  const std::string dir = TempDir();
  NpyArray x{ElementType::kF32, {10, 3}, std::vector<uint8_t>(120)};
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  const std::string out = dir + "/out";
  ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
  const std::string precious = dir + "/precious.txt";
  {
    FILE* f = std::fopen(precious.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("irreplaceable", f);
    std::fclose(f);
  }
  ASSERT_EQ(::symlink("../precious.txt", (out + "/output_0.npy").c_str()), 0)
      << std::strerror(errno);
  const std::string run = "run " SHARDRT_TESTDATA_DIR "/uneven_two_outputs.mlir --devices 4 "
                          "--compile-cache off --arg " + dir + "/x.npy --out " + out;
  testing::TimedResult r = testing::RunCliWithDeadline(run, std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(out + "/output_0.npy: expected a regular file or no file, got a symbolic "
                             "link; not replacing it"),
            std::string::npos)
      << r.err;
  FILE* f = std::fopen(precious.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char text[64] = {};
  std::fread(text, 1, sizeof(text) - 1, f);
  std::fclose(f);
  EXPECT_STREQ(text, "irreplaceable");
  struct stat st {};
  ASSERT_EQ(::lstat((out + "/output_0.npy").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));

  // A regular file in its place is replaced by the whole output.
  ASSERT_EQ(::unlink((out + "/output_0.npy").c_str()), 0);
  {
    FILE* g = std::fopen((out + "/output_0.npy").c_str(), "w");
    ASSERT_NE(g, nullptr);
    std::fputs("an old output, longer than nothing", g);
    std::fclose(g);
  }
  r = testing::RunCliWithDeadline(run, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto y = ReadNpy(out + "/output_0.npy");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{10, 3}));
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// The last line of `text` (without its newline).
std::string LastLineOf(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// `run` of uneven_two_outputs.mlir on 4 devices with an f32[10,3] argument written in `dir`.
std::string UnevenRunIn(const std::string& dir) {
  NpyArray x{ElementType::kF32, {10, 3}, std::vector<uint8_t>(120)};
  EXPECT_TRUE(WriteNpy(dir + "/x.npy", x).ok());
  return "run " SHARDRT_TESTDATA_DIR "/uneven_two_outputs.mlir --devices 4 --arg " + dir +
         "/x.npy";
}

// A command line (through the shell) and the one line it must print on stderr, exiting 1.
struct OneLineError {
  std::string args;
  std::string error;
};

// Runs each case; with `nothing_on_stdout`, the command must also print nothing on stdout.
void ExpectOneLineErrors(const std::vector<OneLineError>& cases, bool nothing_on_stdout) {
  for (const OneLineError& c : cases) {
    SCOPED_TRACE(c.args);
    testing::ShellResult r = testing::RunCliShell(c.args, std::chrono::seconds(300));
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, c.error + "\n");
    if (nothing_on_stdout) {
      EXPECT_EQ(r.out, "");
    }
  }
}

// Output that cannot be written (a full device, a closed stdout) fails the command with one
// line naming the write, instead of exiting 0 having written nothing.
TEST(CliTest, OutputThatCannotBeWrittenFailsWithOneLine) {
  const std::string run = UnevenRunIn(TempDir());
  ExpectOneLineErrors(
      {
          {run + " > /dev/full", "shardrt run: writing the output: No space left on device"},
          {run + " >&-", "shardrt run: writing the output: standard output is closed"},
          {"devices --devices 8 --json > /dev/full",
           "shardrt devices: writing the output: No space left on device"},
          {"devices --devices 8 >&-",
           "shardrt devices: writing the output: standard output is closed"},
          {"run --help > /dev/full", "shardrt run: writing the output: No space left on device"},
      },
      /*nothing_on_stdout=*/false);
}

// A --trace file that cannot be written is refused before the program is read or run.
TEST(CliTest, RunRefusesATraceFileItCannotWriteBeforeRunning) {
  const std::string dir = TempDir();
  const std::string run = UnevenRunIn(dir);
  // Nothing ran: no "ran ... median ..." line on stdout.
  ExpectOneLineErrors(
      {
          {run + " --trace " + dir + "/missing/t.json",
           "shardrt run: flag --trace: " + dir + "/missing/t.json: no folder " + dir +
               "/missing to write it in (No such file or directory)"},
          {run + " --trace " + dir,
           "shardrt run: flag --trace: " + dir + ": expected a regular file, got a directory"},
          {run + " --trace " + dir + "/x.npy/t.json",
           "shardrt run: flag --trace: " + dir + "/x.npy/t.json: cannot write: Not a directory"},
      },
      /*nothing_on_stdout=*/true);
  // A trace that can be written is, and the run reports it on stdout.
  testing::ShellResult ok =
      testing::RunCliShell(run + " --trace " + dir + "/t.json", std::chrono::seconds(300));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(LastLineOf(ok.out).rfind("trace: ", 0), 0u) << ok.out;
}

}  // namespace
}  // namespace shardrt::cli
