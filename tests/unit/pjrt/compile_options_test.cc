// CompileOptionsProto encoding, compared byte for byte with independently worked examples
// (hand-assembled from the protobuf wire format and XLA's field numbers).
#include "shardrt/pjrt/compile_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardrt::pjrt {
namespace {

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// DeviceAssignmentProto for R=1, P=4, devices 0..3:
//   08 01 (replica_count 1) 10 04 (computation_count 4), then 4 x (1a 03 0a 01 <id>).
const std::string kDa4 = Bytes({0x08, 0x01, 0x10, 0x04, 0x1a, 0x03, 0x0a, 0x01, 0x00, 0x1a, 0x03,
                                0x0a, 0x01, 0x01, 0x1a, 0x03, 0x0a, 0x01, 0x02, 0x1a, 0x03, 0x0a,
                                0x01, 0x03});
// device_ordinal = -1 as a 10-byte varint.
const std::string kOrdinal = Bytes({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0x01});

TEST(CompileOptionsTest, GspmdFourPartitionsMatchesWorkedExample) {
  CompileOptions options;
  options.num_partitions = 4;
  options.device_assignment = {0, 1, 2, 3};
  // EBOP: ordinal, 20 01 (R=1), 28 04 (P=4), 30 01 (spmd), 4a 18 <DA>; 43 bytes in all.
  std::string ebop = kOrdinal + Bytes({0x20, 0x01, 0x28, 0x04, 0x30, 0x01, 0x4a, 0x18}) + kDa4;
  ASSERT_EQ(ebop.size(), 0x2bu);
  EXPECT_EQ(EncodeCompileOptions(options), Bytes({0x1a, 0x2b}) + ebop);
}

TEST(CompileOptionsTest, ShardyAppendsField19) {
  CompileOptions options;
  options.num_partitions = 4;
  options.device_assignment = {0, 1, 2, 3};
  options.partitioner = Partitioner::kShardy;
  std::string ebop = kOrdinal + Bytes({0x20, 0x01, 0x28, 0x04, 0x30, 0x01, 0x4a, 0x18}) + kDa4 +
                     Bytes({0x98, 0x01, 0x01});
  ASSERT_EQ(ebop.size(), 0x2eu);
  EXPECT_EQ(EncodeCompileOptions(options), Bytes({0x1a, 0x2e}) + ebop);
}

TEST(CompileOptionsTest, SingleDeviceWritesReplicasAndPartitionsButNoSpmd) {
  CompileOptions options;  // R=1, P=1, no assignment
  std::string ebop = kOrdinal + Bytes({0x20, 0x01, 0x28, 0x01});
  EXPECT_EQ(EncodeCompileOptions(options), Bytes({0x1a, static_cast<int>(ebop.size())}) + ebop);
}

TEST(CompileOptionsTest, PropagationFlagsArePackedRepeatedBools) {
  CompileOptions options;
  options.propagation = ShardingPropagation::kAllowToParametersAndOutputs;
  // field 12 packed: 62 01 01; field 18 packed: 92 01 01 01.
  std::string ebop = kOrdinal + Bytes({0x20, 0x01, 0x28, 0x01, 0x62, 0x01, 0x01, 0x92, 0x01, 0x01,
                                       0x01});
  EXPECT_EQ(EncodeCompileOptions(options), Bytes({0x1a, static_cast<int>(ebop.size())}) + ebop);
}

TEST(CompileOptionsTest, DebugOverrideIsAMapEntryOfField7) {
  CompileOptions options;
  options.debug_option_overrides = {{"xla_dump_to", "/tmp/d"}};
  std::string ebop = kOrdinal + Bytes({0x20, 0x01, 0x28, 0x01});
  std::string entry = Bytes({0x3a, 0x17, 0x0a, 0x0b}) + "xla_dump_to" +
                      Bytes({0x12, 0x08, 0x0a, 0x06}) + "/tmp/d";
  EXPECT_EQ(EncodeCompileOptions(options),
            Bytes({0x1a, static_cast<int>(ebop.size())}) + ebop + entry);
}

TEST(CompileOptionsTest, ValidationNamesTheProblem) {
  std::vector<int64_t> ids = {0, 1, 2, 3};
  CompileOptions too_many;
  too_many.num_partitions = 8;
  absl::Status s = ValidateCompileOptions(too_many, ids);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("need 8 devices, but the client has 4"), absl::string_view::npos)
      << s;
  CompileOptions repeated;
  repeated.num_partitions = 2;
  repeated.device_assignment = {1, 1};
  EXPECT_NE(ValidateCompileOptions(repeated, ids).message().find("repeats device id 1"),
            absl::string_view::npos);
  CompileOptions unknown;
  unknown.num_partitions = 2;
  unknown.device_assignment = {0, 9};
  EXPECT_NE(ValidateCompileOptions(unknown, ids).message().find("unknown device id 9"),
            absl::string_view::npos);
  CompileOptions zero;
  zero.num_replicas = 0;
  EXPECT_FALSE(ValidateCompileOptions(zero, ids).ok());
}

}  // namespace
}  // namespace shardrt::pjrt
