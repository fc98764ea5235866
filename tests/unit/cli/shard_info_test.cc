#include <string>
#include <vector>

#include "cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using ::testing::HasSubstr;

// Runs shard-info and returns its stdout; `status` gets the result.
std::string RunShardInfo(const std::vector<std::string>& args, absl::Status* status) {
  ::testing::internal::CaptureStdout();
  *status = ShardInfoCommand(args);
  return ::testing::internal::GetCapturedStdout();
}

TEST(ShardInfoTest, Json) {
  absl::Status status;
  std::string out =
      RunShardInfo({"--shape", "8,7", "--sharding", "{devices=[2,2]0,1,2,3}", "--json"}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(out,
            "{\"shape\": [8, 7], \"sharding\": \"{devices=[2,2]<=[4]}\", \"num_devices\": 4, "
            "\"shard_shape\": [4, 4], \"shards\": ["
            "{\"device\": 0, \"replica\": 0, \"start\": [0, 0], \"limit\": [4, 4]}, "
            "{\"device\": 1, \"replica\": 0, \"start\": [0, 4], \"limit\": [4, 7]}, "
            "{\"device\": 2, \"replica\": 0, \"start\": [4, 0], \"limit\": [8, 4]}, "
            "{\"device\": 3, \"replica\": 0, \"start\": [4, 4], \"limit\": [8, 7]}]}\n");
}

TEST(ShardInfoTest, JsonReplicatedAndMaximal) {
  absl::Status status;
  std::string out =
      RunShardInfo({"--shape", "3", "--sharding", "{replicated}", "--devices", "2", "--json"}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(out, HasSubstr("{\"device\": 1, \"replica\": 1, \"start\": [0], \"limit\": [3]}"));
  out = RunShardInfo({"--shape=3", "--sharding={maximal device=1}", "--devices=4", "--json"}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(out, HasSubstr("\"shards\": [{\"device\": 1, \"replica\": 0, \"start\": [0], "
                             "\"limit\": [3]}]}"));
}

TEST(ShardInfoTest, TableAndDrawing) {
  absl::Status status;
  std::string out = RunShardInfo({"--shape", "10", "--sharding", "{devices=[4]<=[4]}"}, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(out, HasSubstr("shard shape:  [3]"));
  EXPECT_THAT(out, HasSubstr("3       0        [9]    [10]   [1]"));
  EXPECT_THAT(out, HasSubstr("  [0,3)  [3,6)  [6,9)  [9,10)\n  0      1      2      3\n"));
}

TEST(ShardInfoTest, Errors) {
  absl::Status status;
  RunShardInfo({"--shape", "8", "--sharding", "{replicated}"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("needs the device count (pass --devices N)"));
  RunShardInfo({"--shape", "8", "--sharding", "{devices=[2]0,x}"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("sharding text at position 14"));
  RunShardInfo({"--shape", "8,7,4", "--sharding", "{devices=[2,2]<=[4]}"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("sharding has rank 2 but the array has rank 3"));
  RunShardInfo({"--shape", "8,-1", "--sharding", "{replicated}", "--devices", "2"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("negative"));
  RunShardInfo({"--sharding", "{replicated}"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("--shape is required"));
  EXPECT_EQ(RunShardInfo({"--shape", "8", "--sharding", "{manual}", "--devices", "2"}, &status), "");
  EXPECT_FALSE(status.ok());
}

}  // namespace
}  // namespace shardrt::cli
