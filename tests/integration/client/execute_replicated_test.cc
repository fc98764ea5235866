// ExecuteReplicated on sharded data, on the real plugin with 8 CPU devices, checked against
// host computations.
#include <atomic>
#include <random>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "shardrt/base/metrics.h"
#include "client_test_util.h"
#include "shardrt/pjrt/executable.h"

namespace shardrt {
namespace {

using namespace shardrt::testing;

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class ExecuteReplicatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = MakeClient();
    ASSERT_NE(client_, nullptr);
  }
  TestRuntime client_;
};

TEST_F(ExecuteReplicatedTest, PartiallyReplicatedMatmulMatchesHost) {
  ComputationPtr c = CompileTestProgram(*client_, "partial_replication_matmul.mlir", 8);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->parameter_layout(0)->sharding.ToString(),
            "{devices=[4,1,2]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(c->parameter_layout(0)->shard_dims, (std::vector<int64_t>{2, 6}));
  std::vector<float> x = RandomFloats(8 * 6, 1), w = RandomFloats(6 * 4, 2);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {8, 6}, x),
                      c->parameter_layout(0)->sharding);
  DataPtr dw = Upload(*client_, MakeArray(ElementType::kF32, {6, 4}, w), Sharding::Replicated());
  auto out = client_->ExecuteReplicated(*c, {dx, dw});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0]->sharding(), c->output_layout(0)->sharding);
  std::vector<float> y = Values<float>(Download(*client_, (*out)[0]));
  ASSERT_EQ(y.size(), 32u);
  for (int r = 0; r < 8; ++r) {
    for (int col = 0; col < 4; ++col) {
      double e = 0;
      for (int k = 0; k < 6; ++k) e += double(x[r * 6 + k]) * w[k * 4 + col];
      EXPECT_NEAR(y[r * 4 + col], e, 1e-5);
    }
  }
}

// Whether a compiled program communicates across devices is read from its optimized program:
// an elementwise program does not (its launches skip the in-flight limiter and its completion
// events); programs that reduce over their sharded dimension do (the partitioner inserts an
// all-reduce that the source does not name). The collective-free one keeps giving the host's
// answer over repeated launches.
TEST_F(ExecuteReplicatedTest, KnowsWhichProgramsCommunicate) {
  ComputationPtr add = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ComputationPtr step = CompileTestProgram(*client_, "executor_step_allreduce.mlir", 8);
  ComputationPtr sum = CompileTestProgram(*client_, "sharded_matmul_sum.mlir", 8);
  ASSERT_NE(add, nullptr);
  ASSERT_NE(step, nullptr);
  ASSERT_NE(sum, nullptr);
  EXPECT_TRUE(add->executable().signature().collective_free);
  EXPECT_FALSE(step->executable().signature().collective_free);
  EXPECT_FALSE(sum->executable().signature().collective_free);
  std::vector<float> x(16 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  for (int call = 0; call < 20; ++call) {
    DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x),
                        add->parameter_layout(0)->sharding);
    auto out = client_->ExecuteReplicated(*add, {dx});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    std::vector<float> y = Values<float>(Download(*client_, (*out)[0]));
    ASSERT_EQ(y.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] + 1.0f);
  }
}

// Several outputs with the same shape, type and sharding and other values: each comes back in
// its own place, read directly and through placeholders assigned from them.
TEST_F(ExecuteReplicatedTest, OutputsOfTheSameLayoutComeBackInTheirOwnPlaces) {
  ComputationPtr c = CompileTestProgram(*client_, kSameLayoutOutputsProgram, 8);
  ASSERT_NE(c, nullptr);
  const std::vector<float> x = SameLayoutOutputsInput();
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x),
                      c->parameter_layout(0)->sharding);
  ASSERT_NE(dx, nullptr);
  auto out = client_->ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSameLayoutOutputs(*client_, *out, x);
  std::vector<DataPtr> placeholders;
  for (size_t o = 0; o < out->size(); ++o) {
    placeholders.push_back(client_->CreateDataPlaceholder(c->output_layout(o)));
    ASSERT_TRUE(placeholders.back()->Assign((*out)[o]).ok()) << o;
  }
  ExpectSameLayoutOutputs(*client_, placeholders, x);
}

TEST_F(ExecuteReplicatedTest, UnevenShardsAndTwoOutputsWithDifferentShardings) {
  ComputationPtr c = CompileTestProgram(*client_, "uneven_two_outputs.mlir", 4);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->parameter_layout(0)->shard_dims, (std::vector<int64_t>{3, 3}));  // padded
  EXPECT_TRUE(c->output_layout(1)->sharding.IsReplicated());
  std::vector<float> x = RandomFloats(30, 3);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {10, 3}, x),
                      MustParse("{devices=[4,1]<=[4]}"), 4);
  auto out = client_->ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<float> y = Values<float>(Download(*client_, (*out)[0]));
  std::vector<float> s = Values<float>(Download(*client_, (*out)[1]));
  ASSERT_EQ(y.size(), 30u);
  ASSERT_EQ(s.size(), 3u);
  for (int i = 0; i < 30; ++i) EXPECT_FLOAT_EQ(y[i], 2 * x[i] + 1);
  for (int col = 0; col < 3; ++col) {
    double e = 0;
    for (int r = 0; r < 10; ++r) e += x[r * 3 + col];
    EXPECT_NEAR(s[col], e, 1e-5) << "padding rows must not leak into the sum";
  }
}

TEST_F(ExecuteReplicatedTest, IntegerTypesAndReplicatedArguments) {
  ComputationPtr c = CompileTestProgram(*client_, "int_ops.mlir", 8);
  ASSERT_NE(c, nullptr);
  std::vector<int32_t> x(64), b = {5, -7, 1 << 20, 0};
  std::mt19937 rng(4);
  for (int32_t& v : x) v = static_cast<int32_t>(rng() % 2001) - 1000;
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kS32, {16, 4}, x),
                      MustParse("{devices=[8,1]<=[8]}"));
  DataPtr db = Upload(*client_, MakeArray(ElementType::kS32, {4}, b), Sharding::Replicated());
  auto out = client_->ExecuteReplicated(*c, {dx, db});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<int32_t> y = Values<int32_t>(Download(*client_, (*out)[0]));
  std::vector<int32_t> m = Values<int32_t>(Download(*client_, (*out)[1]));
  ASSERT_EQ(y.size(), 64u);
  ASSERT_EQ(m.size(), 4u);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 4; ++col) EXPECT_EQ(y[r * 4 + col], 3 * x[r * 4 + col] + b[col]);
  for (int col = 0; col < 4; ++col) {
    int32_t e = x[col];
    for (int r = 1; r < 16; ++r) e = std::max(e, x[r * 4 + col]);
    EXPECT_EQ(m[col], e);
  }
}

TEST_F(ExecuteReplicatedTest, ReshardRoundTripsAndReplicate) {
  std::vector<float> x = RandomFloats(16 * 6, 5);
  HostArray host = MakeArray(ElementType::kF32, {16, 6}, x);
  const char* shardings[] = {"{devices=[8,1]<=[8]}", "{devices=[2,4]<=[8]}",
                             "{devices=[4,2]<=[2,4]T(1,0)}",
                             "{devices=[1,2,4]<=[8] last_tile_dim_replicate}", "{replicated}",
                             "{devices=[8,1]<=[8]}"};
  DataPtr current = Upload(*client_, host, MustParse(shardings[0]));
  for (size_t i = 1; i < std::size(shardings); ++i) {
    auto next = client_->ReshardData(current, MustParse(shardings[i]));
    ASSERT_TRUE(next.ok()) << shardings[i] << ": " << next.status();
    EXPECT_EQ((*next)->sharding(), MustParse(shardings[i]));
    EXPECT_EQ(Values<float>(Download(*client_, *next)), x) << shardings[i];
    current = *next;
  }
  int64_t before = GlobalMetrics().CounterValue(kReplicateShardedData);
  auto replicated = client_->ReplicateShardedData(current);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_TRUE((*replicated)->sharding().IsReplicated());
  EXPECT_EQ(Values<float>(Download(*client_, *replicated)), x);
  EXPECT_EQ(GlobalMetrics().CounterValue(kReplicateShardedData), before + 1);
  // The reshard program is compiled once per layout pair: a second replicate is a cache hit.
  int64_t cached = GlobalMetrics().CounterValue(kCachedCompile);
  ASSERT_TRUE(client_->ReplicateShardedData(current).ok());
  EXPECT_EQ(GlobalMetrics().CounterValue(kCachedCompile), cached + 1);
}

// Results that depend on which rows each device holds: a shard uploaded to, or read back from,
// the wrong device is weighted by the wrong rows. Run with the program's sharding, with two
// other argument shardings resharded on device, and with the outputs downloaded as is.
TEST_F(ExecuteReplicatedTest, PositionDependentResultsSeeWhereEveryShardSits) {
  ComputationPtr c = CompileTestProgram(*client_, "position_weighted.mlir", 8);
  ASSERT_NE(c, nullptr);
  std::vector<float> x = RandomFloats(18 * 4, 21);
  for (const char* sharding : {"{devices=[8,1]<=[8]}", "{devices=[2,4]<=[8]}",
                               "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"}) {
    SCOPED_TRACE(sharding);
    DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {18, 4}, x), MustParse(sharding));
    ExecuteReplicatedOptions options;
    options.resharding = ArgumentResharding::kReshardCopy;
    auto out = client_->ExecuteReplicated(*c, {dx}, options);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    std::vector<float> y = Values<float>(Download(*client_, (*out)[0]));
    std::vector<float> s = Values<float>(Download(*client_, (*out)[1]));
    ASSERT_EQ(y.size(), 72u);
    ASSERT_EQ(s.size(), 4u);
    for (int r = 0; r < 18; ++r) {
      for (int col = 0; col < 4; ++col) {
        EXPECT_FLOAT_EQ(y[r * 4 + col], x[r * 4 + col] * static_cast<float>(r + 1));
      }
    }
    for (int col = 0; col < 4; ++col) {
      double e = 0;
      for (int r = 0; r < 18; ++r) e += double{x[r * 4 + col]} * (r + 1);
      EXPECT_NEAR(s[col], e, 1e-3);
    }
  }
}

// Compile reads the program text itself: a Shardy program compiles with the Shardy partitioner
// without being asked (and runs right), and a declared partition count that differs from the
// options is an error before the compiler sees the program.
TEST_F(ExecuteReplicatedTest, CompileDetectsShardyAndChecksTheDeclaredPartitions) {
  CompileRequest request;
  request.name = "shardy_row_sum";
  request.program = ReadTestData("shardy_row_sum.mlir");
  request.options.num_partitions = 8;  // partitioner left at its default (GSPMD)
  auto shardy = client_->Compile(request);
  ASSERT_TRUE(shardy.ok()) << shardy.status();
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x),
                      (*shardy)->parameter_layout(0)->sharding);
  auto out = client_->ExecuteReplicated(**shardy, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<float> sums = Values<float>(Download(*client_, (*out)[1]));
  ASSERT_EQ(sums.size(), 4u);
  for (int j = 0; j < 4; ++j) {
    float expected = 0;
    for (int i = 0; i < 16; ++i) expected += x[i * 4 + j];
    EXPECT_FLOAT_EQ(sums[j], expected);
  }

  request.options.num_partitions = 4;
  auto mismatch = client_->Compile(request);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find(
                "shardy_row_sum: the program declares mhlo.num_partitions = 8 but is compiled "
                "for 4 partitions"),
            absl::string_view::npos)
      << mismatch.status();
}

TEST_F(ExecuteReplicatedTest, PlaceholdersAreFilledByAssign) {
  ComputationPtr c = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(c, nullptr);
  DataPtr placeholder = client_->CreateDataPlaceholder(c->output_layout(0));
  EXPECT_EQ(placeholder->state(), Data::State::kPending);
  // Using an unfilled placeholder is an error, not a crash.
  auto early = client_->ExecuteReplicated(*c, {placeholder});
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();

  std::vector<float> x = RandomFloats(64, 6);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x),
                      MustParse("{devices=[8,1]<=[8]}"));
  // The filler thread never asserts (a failed ASSERT there would leave this thread waiting):
  // it fails the placeholder instead, and the wait is bounded.
  absl::Status filled;
  std::thread filler([&] {
    auto out = client_->ExecuteReplicated(*c, {dx});
    filled = !out.ok()            ? out.status()
             : out->size() != 1 ? absl::InternalError("expected one output")
                                : placeholder->Assign((*out)[0]);
    if (!filled.ok()) placeholder->Fail(filled);
  });
  const absl::Status awaited = placeholder->Await(absl::Seconds(120));
  WITH_DEADLINE(filler.join());
  ASSERT_TRUE(filled.ok()) << filled;
  ASSERT_TRUE(awaited.ok()) << awaited;
  std::vector<float> y = Values<float>(Download(*client_, placeholder));
  ASSERT_EQ(y.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], x[i] + 1);
  // A second Assign, or one with another layout, is an error.
  DataPtr other = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x), Sharding::Replicated());
  EXPECT_FALSE(placeholder->Assign(other).ok());
  DataPtr wrong = client_->CreateDataPlaceholder(c->output_layout(0));
  absl::Status mismatch = wrong->Assign(other);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("placeholder expects f32[16,4] {devices=[8,1]<=[8]}"),
            absl::string_view::npos)
      << mismatch;
  // A failed placeholder reports its error.
  DataPtr failed = client_->CreateDataPlaceholder(c->output_layout(0));
  failed->Fail(absl::InternalError("step 3 failed"));
  EXPECT_EQ(failed->Await().message(), "step 3 failed");
}

TEST_F(ExecuteReplicatedTest, ReleaseAllDropsEverythingAndSparesWhatOthersHold) {
  ComputationPtr c = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(c, nullptr);
  const Sharding rows = MustParse("{devices=[8,1]<=[8]}");
  std::vector<float> x = RandomFloats(64, 8);
  std::vector<DataPtr> outputs;
  for (int i = 0; i < 4; ++i) {
    DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x), rows);
    auto out = client_->ExecuteReplicated(*c, {dx});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    outputs.push_back((*out)[0]);
  }
  DataPtr also_held = outputs[1];                          // another reference to the same data
  DataPtr filled = client_->CreateDataPlaceholder(c->output_layout(0));
  ASSERT_TRUE(filled->Assign(outputs[2]).ok());           // shares output 2's buffers
  DataPtr donated = outputs[3];
  ASSERT_TRUE(client_->ExecuteReplicated(*c, {donated}).ok());  // output 3 is spent
  outputs.push_back(nullptr);
  outputs.push_back(client_->CreateDataPlaceholder(c->output_layout(0)));  // still pending
  std::vector<std::weak_ptr<Data>> watched(outputs.begin(), outputs.end());
  donated.reset();

  Data::ReleaseAll(outputs);
  EXPECT_TRUE(outputs.empty());
  EXPECT_TRUE(watched[0].expired());
  EXPECT_FALSE(watched[1].expired());
  EXPECT_FALSE(watched[2].expired());  // the placeholder reads its buffers: it holds it
  EXPECT_TRUE(watched[3].expired());
  EXPECT_TRUE(watched[5].expired());
  // What others hold still computes.
  std::vector<float> y = Values<float>(Download(*client_, also_held));
  std::vector<float> z = Values<float>(Download(*client_, filled));
  ASSERT_EQ(y.size(), 64u);
  ASSERT_EQ(z.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    EXPECT_FLOAT_EQ(y[i], x[i] + 1);
    EXPECT_FLOAT_EQ(z[i], x[i] + 1);
  }
  auto next = client_->ExecuteReplicated(*c, {filled});
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->size(), 1u);
  std::vector<float> w = Values<float>(Download(*client_, (*next)[0]));
  ASSERT_EQ(w.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(w[i], x[i] + 2);
  filled.reset();  // the last holder of output 2's data
  EXPECT_TRUE(watched[2].expired());
}

TEST_F(ExecuteReplicatedTest, HostPointersReadShardsInPlaceAndOutsideReferencesKeepTheMemory) {
  ComputationPtr c = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(c, nullptr);
  std::vector<float> x = RandomFloats(64, 9);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x),
                      MustParse("{devices=[8,1]<=[8]}"));
  const pjrt::Buffer& shard3 = dx->buffers()->buffers[3];
  ASSERT_TRUE(shard3.ReadyEvent()->Await().ok());
  absl::StatusOr<void*> pointer = shard3.HostPointer();
  ASSERT_TRUE(pointer.ok()) << pointer.status();
  // Device 3 holds rows 6 and 7: elements 24..31, in place.
  std::vector<float> in_place(8);
  std::memcpy(in_place.data(), *pointer, 8 * sizeof(float));
  EXPECT_EQ(in_place, std::vector<float>(x.begin() + 24, x.begin() + 32));

  // While an outside user holds the memory, the plugin does not hand it to the execution: the
  // call copies instead, and the memory keeps the argument's values for as long as the
  // reference is held (shardrt still treats the argument as spent).
  ASSERT_TRUE(shard3.AcquireExternalReference().ok());
  auto out = client_->ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(dx->state(), Data::State::kDonated);
  EXPECT_FALSE(shard3.IsDeleted());
  std::vector<float> y = Values<float>(Download(*client_, (*out)[0]));
  ASSERT_EQ(y.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], x[i] + 1);
  auto next = client_->ExecuteReplicated(*c, {(*out)[0]});  // reuses freed memory, if any
  ASSERT_TRUE(next.ok()) << next.status();
  std::memcpy(in_place.data(), *pointer, 8 * sizeof(float));
  EXPECT_EQ(in_place, std::vector<float>(x.begin() + 24, x.begin() + 32));
  ASSERT_TRUE(shard3.ReleaseExternalReference().ok());
}

TEST_F(ExecuteReplicatedTest, DataDonatedAndPassedAgainIsRefusedBeforeThePlugin) {
  ComputationPtr c = CompileTestProgram(*client_, "donate_add.mlir", 8);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->donates_parameter(0));
  const Sharding rows = MustParse("{devices=[8,1]<=[8]}");
  std::vector<float> x = RandomFloats(64, 10), y = RandomFloats(64, 11);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, x), rows);
  DataPtr dy = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, y), rows);
  // The same data twice, or a placeholder sharing its buffers: refused, nothing launched.
  DataPtr alias = client_->CreateDataPlaceholder(c->parameter_layout(0));
  ASSERT_TRUE(alias->Assign(dx).ok());
  for (const DataPtr& second : {dx, alias}) {
    auto twice = client_->ExecuteReplicated(*c, {dx, second});
    EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument) << twice.status();
    EXPECT_NE(twice.status().message().find("argument 0 would be donated but is also argument 1"),
              absl::string_view::npos)
        << twice.status();
    EXPECT_EQ(dx->state(), Data::State::kReady);
  }
  // Kept for the call, the same data may be passed twice: z = x + x.
  ExecuteReplicatedOptions keep;
  keep.non_donatable_input_indices = {0};
  auto doubled = client_->ExecuteReplicated(*c, {dx, dx}, keep);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  ASSERT_EQ(doubled->size(), 1u);
  std::vector<float> got = Values<float>(Download(*client_, (*doubled)[0]));
  ASSERT_EQ(got.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(got[i], x[i] + x[i]);
  // And the client keeps working: the donating call itself.
  auto sum = client_->ExecuteReplicated(*c, {dx, dy});
  ASSERT_TRUE(sum.ok()) << sum.status();
  ASSERT_EQ(sum->size(), 1u);
  got = Values<float>(Download(*client_, (*sum)[0]));
  ASSERT_EQ(got.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(got[i], x[i] + y[i]);
  EXPECT_EQ(dx->state(), Data::State::kDonated);
}

TEST_F(ExecuteReplicatedTest, ALayoutListsEachDeviceOnce) {
  auto devices = client_->DefaultDevices(2);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  auto twice = client_->MakeLayout({ElementType::kF32, {4, 4}}, MustParse("{devices=[2,1]<=[2]}"),
                                   {(*devices)[0], (*devices)[0]});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("data layout lists device 0 more than once (devices 0,0)"),
            absl::string_view::npos)
      << twice.status();
  EXPECT_TRUE(client_->MakeLayout({ElementType::kF32, {4, 4}}, MustParse("{devices=[2,1]<=[2]}"),
                                  {(*devices)[1], (*devices)[0]})
                  .ok());
}

TEST_F(ExecuteReplicatedTest, DonatedInputIsUnusableAfterwards) {
  ComputationPtr c = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->donates_parameter(0));
  std::vector<float> x = RandomFloats(64, 7);
  HostArray host = MakeArray(ElementType::kF32, {16, 4}, x);
  DataPtr dx = Upload(*client_, host, MustParse("{devices=[8,1]<=[8]}"));
  auto out = client_->ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(dx->state(), Data::State::kDonated);
  auto again = client_->ExecuteReplicated(*c, {dx});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("argument 0: data f32[16,4]"), absl::string_view::npos);
  EXPECT_NE(again.status().message().find("was donated"), absl::string_view::npos)
      << again.status();
  ASSERT_EQ(out->size(), 1u);
  // Chaining the output works and keeps computing.
  auto out2 = client_->ExecuteReplicated(*c, {(*out)[0]});
  ASSERT_TRUE(out2.ok());
  ASSERT_EQ(out2->size(), 1u);
  std::vector<float> y = Values<float>(Download(*client_, (*out2)[0]));
  ASSERT_EQ(y.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], x[i] + 2);
  // Per-call non-donatable index keeps the input alive.
  DataPtr kept = Upload(*client_, host, MustParse("{devices=[8,1]<=[8]}"));
  ExecuteReplicatedOptions options;
  options.non_donatable_input_indices = {0};
  ASSERT_TRUE(client_->ExecuteReplicated(*c, {kept}, options).ok());
  EXPECT_EQ(kept->state(), Data::State::kReady);
  EXPECT_EQ(Values<float>(Download(*client_, kept)), x);
}

TEST_F(ExecuteReplicatedTest, NoExecutableIntrospectionOnTheHotPath) {
  ComputationPtr c = CompileTestProgram(*client_, "int_ops.mlir", 8);
  ASSERT_NE(c, nullptr);
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kS32, {16, 4}, std::vector<int32_t>(64, 1)),
                      MustParse("{devices=[8,1]<=[8]}"));
  DataPtr db = Upload(*client_, MakeArray(ElementType::kS32, {4}, std::vector<int32_t>(4, 2)),
                      Sharding::Replicated());
  ASSERT_TRUE(client_->ExecuteReplicated(*c, {dx, db}).ok());
  const int64_t after_one = GlobalMetrics().CounterValue(kExecutableIntrospection);
  EXPECT_GT(after_one, 0) << "compiling does introspect, and is counted";
  for (int i = 0; i < 99; ++i) ASSERT_TRUE(client_->ExecuteReplicated(*c, {dx, db}).ok());
  EXPECT_EQ(GlobalMetrics().CounterValue(kExecutableIntrospection), after_one);
}

TEST_F(ExecuteReplicatedTest, EightThreadsExecuteConcurrentlyOnSharedInputs) {
  ComputationPtr c = CompileTestProgram(*client_, "int_ops.mlir", 8);
  ASSERT_NE(c, nullptr);
  std::vector<int32_t> x(64);
  for (int i = 0; i < 64; ++i) x[i] = i;
  DataPtr dx = Upload(*client_, MakeArray(ElementType::kS32, {16, 4}, x),
                      MustParse("{devices=[8,1]<=[8]}"));
  DataPtr db = Upload(*client_, MakeArray(ElementType::kS32, {4}, std::vector<int32_t>{1, 2, 3, 4}),
                      Sharding::Replicated());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 10; ++k) {
        auto out = client_->ExecuteReplicated(*c, {dx, db});
        if (!out.ok()) {
          ++failures;
          continue;
        }
        auto host = client_->TransferFromDevice(*out);
        if (!host.ok() || host->empty() || Values<int32_t>((*host)[0]).size() != 64 ||
            Values<int32_t>((*host)[0])[5] != 3 * 5 + 2) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) WITH_DEADLINE(t.join());
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ExecuteReplicatedTest, BadArgumentsAreClearErrors) {
  ComputationPtr c = CompileTestProgram(*client_, "int_ops.mlir", 8);
  ASSERT_NE(c, nullptr);
  HostArray xs = MakeArray(ElementType::kS32, {16, 4}, std::vector<int32_t>(64, 1));
  DataPtr dx = Upload(*client_, xs, MustParse("{devices=[8,1]<=[8]}"));
  DataPtr db = Upload(*client_, MakeArray(ElementType::kS32, {4}, std::vector<int32_t>(4, 2)),
                      Sharding::Replicated());
  // Wrong count.
  auto count = client_->ExecuteReplicated(*c, {dx});
  EXPECT_NE(count.status().message().find("got 1 arguments, expected 2"), absl::string_view::npos)
      << count.status();
  // Wrong sharding, without and with resharding.
  DataPtr dx_cols = Upload(*client_, xs, MustParse("{devices=[2,4]<=[8]}"));
  auto sharding = client_->ExecuteReplicated(*c, {dx_cols, db});
  EXPECT_EQ(sharding.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sharding.status().message().find(
                "argument 0 expected s32[16,4] {devices=[8,1]<=[8]} on 8 devices, got s32[16,4] "
                "{devices=[2,4]<=[8]} on 8 devices"),
            absl::string_view::npos)
      << sharding.status();
  ExecuteReplicatedOptions reshard;
  reshard.resharding = ArgumentResharding::kReshardCopy;
  auto resharded = client_->ExecuteReplicated(*c, {dx_cols, db}, reshard);
  ASSERT_TRUE(resharded.ok()) << resharded.status();
  ASSERT_EQ(resharded->size(), 2u);
  std::vector<int32_t> resharded_y = Values<int32_t>(Download(*client_, (*resharded)[0]));
  ASSERT_EQ(resharded_y.size(), 64u);
  EXPECT_EQ(resharded_y[0], 5);
  // Wrong dtype.
  DataPtr dx_f32 = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, std::vector<float>(64)),
                          MustParse("{devices=[8,1]<=[8]}"));
  auto dtype = client_->ExecuteReplicated(*c, {dx_f32, db});
  EXPECT_NE(dtype.status().message().find("expected s32[16,4]"), absl::string_view::npos);
  EXPECT_NE(dtype.status().message().find("got f32[16,4]"), absl::string_view::npos)
      << dtype.status();
  // Null argument.
  auto null_arg = client_->ExecuteReplicated(*c, {dx, nullptr});
  EXPECT_NE(null_arg.status().message().find("argument 1 is null"), absl::string_view::npos);
  // Data of another client.
  TestRuntime other = MakeClient();
  ASSERT_TRUE(other);
  DataPtr foreign = Upload(*other, xs, MustParse("{devices=[8,1]<=[8]}"));
  auto cross = client_->ExecuteReplicated(*c, {foreign, db});
  EXPECT_NE(cross.status().message().find("argument 0 belongs to another client"),
            absl::string_view::npos)
      << cross.status();
  // After all these errors the good call still works.
  EXPECT_TRUE(client_->ExecuteReplicated(*c, {dx, db}).ok());
}

TEST_F(ExecuteReplicatedTest, CompileCacheHitsOnTheSameProgram) {
  int64_t cached = GlobalMetrics().CounterValue(kCachedCompile);
  ComputationPtr a = CompileTestProgram(*client_, "uneven_two_outputs.mlir", 4);
  ComputationPtr b = CompileTestProgram(*client_, "uneven_two_outputs.mlir", 4);
  EXPECT_EQ(a, b);
  EXPECT_EQ(GlobalMetrics().CounterValue(kCachedCompile), cached + 1);
}

TEST_F(ExecuteReplicatedTest, EvictedComputationIsCompiledAgainAndKeepsWorking) {
  ComputationPtr a = CompileTestProgram(*client_, "uneven_two_outputs.mlir", 4);
  std::weak_ptr<const Computation> weak = a;
  EXPECT_TRUE(client_->EvictCompiled(*a));
  EXPECT_FALSE(client_->EvictCompiled(*a));  // no longer held
  EXPECT_FALSE(weak.expired());              // the caller's copy lives on
  const int64_t cached = GlobalMetrics().CounterValue(kCachedCompile);
  ComputationPtr b = CompileTestProgram(*client_, "uneven_two_outputs.mlir", 4);
  EXPECT_NE(a, b);  // compiled again, not the evicted one
  EXPECT_EQ(GlobalMetrics().CounterValue(kCachedCompile), cached);
  // The evicted computation still runs, and gives what the new one gives.
  std::vector<DataPtr> args;
  for (size_t i = 0; i < a->num_parameters(); ++i) {
    const ArrayShape& shape = a->parameter_layout(i)->global;
    int64_t n = 1;
    for (int64_t d : shape.dims) n *= d;
    std::vector<float> values(n);
    for (int64_t j = 0; j < n; ++j) values[j] = float(j % 7) - 2.5f;
    const HostArrayView view{shape.type, shape.dims,
                             std::as_bytes(std::span<const float>(values))};
    auto uploaded = client_->TransferToDevice({&view, 1}, {&a->parameter_layout(i), 1});
    ASSERT_TRUE(uploaded.ok()) << uploaded.status();
    ASSERT_EQ(uploaded->size(), 1u);
    args.push_back((*uploaded)[0]);
  }
  auto from_a = client_->ExecuteReplicated(*a, args);
  auto from_b = client_->ExecuteReplicated(*b, args);
  ASSERT_TRUE(from_a.ok() && from_b.ok());
  auto host_a = client_->TransferFromDevice(*from_a);
  auto host_b = client_->TransferFromDevice(*from_b);
  ASSERT_TRUE(host_a.ok() && host_b.ok());
  ASSERT_EQ(host_a->size(), host_b->size());
  for (size_t i = 0; i < host_a->size(); ++i) EXPECT_EQ((*host_a)[i].data, (*host_b)[i].data) << i;
  a.reset();
  EXPECT_TRUE(weak.expired());  // freed with its last holder
}

}  // namespace
}  // namespace shardrt

namespace shardrt {
namespace {

using namespace shardrt::testing;

// x + 1 through donate_add_one.mlir (f32[16,4] split over 8 devices), x not donated, read back.
std::vector<float> AddOneKeepingTheArgument(ComputationClient& client, const DataPtr& x) {
  ComputationPtr c = CompileTestProgram(client, "donate_add_one.mlir", 8);
  if (c == nullptr) return {};
  auto out = client.ExecuteReplicated(*c, {x}, {.non_donatable_input_indices = {0}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->size(), 1u);
  return out->size() == 1 ? Values<float>(Download(client, (*out)[0])) : std::vector<float>{};
}

// Every sharding kind survives TransferToDevice -> TransferFromDevice bit for bit, including
// strided (column) shards uploaded straight from host memory and padded uneven shards.
TEST(TransferTest, RoundTripsForManyShardings) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  std::vector<float> x(16 * 10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  HostArray host = MakeArray(ElementType::kF32, {16, 10}, x);
  for (const char* text :
       {"{devices=[8,1]<=[8]}", "{devices=[6,1]<=[6]}", "{devices=[1,2]<=[2]}", "{devices=[1,8]<=[8]}", "{devices=[2,4]<=[8]}",
        "{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}",
        "{devices=[8,1]7,6,5,4,3,2,1,0}", "{replicated}", "{maximal device=3}",
        "{devices=[1,3]<=[3]}"}) {
    Sharding sharding = MustParse(text);
    DataPtr data = Upload(*client, host, sharding, sharding.num_devices().value_or(8));
    ASSERT_NE(data, nullptr) << text;
    EXPECT_EQ(Values<float>(Download(*client, data)), x) << text;
    // The device must read the uploaded shards as the program expects them: gather them on
    // device (an executed program) and compare.
    auto replicated = client->ReplicateShardedData(data);
    ASSERT_TRUE(replicated.ok()) << text << ": " << replicated.status();
    EXPECT_EQ(Values<float>(Download(*client, *replicated)), x) << text;
  }
}

// Many arrays uploaded (or outputs wrapped) together share one block of host memory for their
// Data objects; each piece must still die on its own, its buffers with it, on any thread, and
// the others keep their values.
TEST(TransferTest, ManyArraysUploadedTogetherDieOneByOne) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  constexpr int kArrays = 12;
  auto layout =
      client->MakeLayout({ElementType::kF32, {16, 4}}, MustParse("{devices=[8,1]<=[8]}"));
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<std::vector<float>> values(kArrays);
  std::vector<HostArrayView> views;
  for (int a = 0; a < kArrays; ++a) {
    values[a] = RandomFloats(64, 100 + a);
    views.push_back({ElementType::kF32, {16, 4}, std::as_bytes(std::span(values[a]))});
  }
  std::vector<std::shared_ptr<const DataLayout>> layouts(kArrays, *layout);
  auto data = client->TransferToDevice(views, layouts);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->size(), static_cast<size_t>(kArrays));
  std::vector<std::weak_ptr<Data>> watched(data->begin(), data->end());
  // Even pieces go now, on other threads; odd ones stay and still read back.
  std::vector<std::thread> threads;
  for (int a = 0; a < kArrays; a += 2) {
    threads.emplace_back([piece = std::move((*data)[a])]() mutable { piece.reset(); });
  }
  for (std::thread& t : threads) t.join();
  for (int a = 0; a < kArrays; ++a) {
    EXPECT_EQ(watched[a].expired(), a % 2 == 0) << a;
    if (a % 2 == 1) {
      EXPECT_EQ(Values<float>(Download(*client, (*data)[a])), values[a]) << a;
    }
  }
  // An odd one still works as an argument.
  std::vector<float> y = AddOneKeepingTheArgument(*client, (*data)[1]);
  ASSERT_EQ(y.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], values[1][i] + 1);
  data->clear();
  for (int a = 0; a < kArrays; ++a) EXPECT_TRUE(watched[a].expired()) << a;
}

// The outputs of one execution share one block of host memory, which also holds their client
// and the computation's output layouts: outputs outlive the computation (evicted and dropped),
// keep their layouts, read back, die one by one, and run as arguments of another program.
TEST(ExecuteOutputsTest, ManyOutputsOutliveTheirComputation) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  constexpr int kOutputs = 6;
  std::string results, returns, body;
  for (int o = 0; o < kOutputs; ++o) {
    const char* sharding = o % 2 == 0 ? "{devices=[8,1]<=[8]}" : "{replicated}";
    absl::StrAppend(&results, o ? ", " : "", "tensor<16x4xf32> {mhlo.sharding = \"", sharding,
                    "\"}");
    absl::StrAppend(&body, "    %c", o, " = stablehlo.constant dense<", o + 1,
                    ".0> : tensor<16x4xf32>\n    %y", o, " = stablehlo.multiply %x, %c", o,
                    " : tensor<16x4xf32>\n");
    absl::StrAppend(&returns, o ? ", " : "", "%y", o);
  }
  CompileRequest request;
  request.name = "six_multiples";
  request.options.num_partitions = 8;
  request.program = absl::StrCat(
      "module @six_multiples attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : "
      "i32} {\n  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "
      "\"{devices=[8,1]<=[8]}\"}) -> (",
      results, ") {\n", body, "    return ", returns, " : ",
      absl::StrJoin(std::vector<std::string>(kOutputs, "tensor<16x4xf32>"), ", "), "\n  }\n}\n");
  auto compiled = client->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::weak_ptr<const Computation> watched_computation = *compiled;
  std::vector<float> x = RandomFloats(64, 21);
  DataPtr dx = Upload(*client, MakeArray(ElementType::kF32, {16, 4}, x),
                      MustParse("{devices=[8,1]<=[8]}"));
  auto out = client->ExecuteReplicated(**compiled, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), static_cast<size_t>(kOutputs));
  EXPECT_TRUE(client->EvictCompiled(**compiled));
  compiled = absl::InternalError("dropped");
  EXPECT_TRUE(watched_computation.expired());
  std::vector<std::weak_ptr<Data>> watched(out->begin(), out->end());
  (*out)[0].reset();
  (*out)[3].reset();
  for (int o = 0; o < kOutputs; ++o) {
    EXPECT_EQ(watched[o].expired(), o == 0 || o == 3) << o;
    if (o == 0 || o == 3) continue;
    const DataPtr& y = (*out)[o];
    EXPECT_EQ(y->layout().ToString(), absl::StrCat("f32[16,4] ",
                                                   o % 2 == 0 ? "{devices=[8,1]<=[8]}"
                                                              : "{replicated}",
                                                   " on 8 devices"));
    EXPECT_EQ(y->client(), client->pjrt_client());
    std::vector<float> values = Values<float>(Download(*client, y));
    ASSERT_EQ(values.size(), x.size()) << o;
    for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(values[i], x[i] * (o + 1)) << o << " " << i;
  }
  // Output 2 (row-split, like the program's parameter) runs as an argument, and a placeholder
  // assigned from output 1 keeps it (and its block) alive after the list is cleared.
  std::vector<float> z = AddOneKeepingTheArgument(*client, (*out)[2]);
  ASSERT_EQ(z.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(z[i], x[i] * 3 + 1) << i;
  DataPtr placeholder =
      Data::CreatePlaceholder(client->pjrt_client(), (*out)[1]->shared_layout());
  ASSERT_TRUE(placeholder->Assign((*out)[1]).ok());
  out->clear();
  std::vector<float> kept = Values<float>(Download(*client, placeholder));
  ASSERT_EQ(kept.size(), x.size());
  EXPECT_EQ(kept[5], x[5] * 2);
  for (int o = 0; o < kOutputs; ++o) EXPECT_EQ(watched[o].expired(), o != 1) << o;
  placeholder.reset();
  EXPECT_TRUE(watched[1].expired());
}

// TransferFromDevice into caller memory gives the same bytes as the allocating form for every
// sharding kind (contiguous runs land in place, others through staging), writes nothing past
// its destination, and refuses a destination of the wrong size or count before copying.
TEST(TransferTest, DownloadsIntoCallerMemory) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  std::vector<float> x(16 * 10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 40.5f;
  HostArray host = MakeArray(ElementType::kF32, {16, 10}, x);
  for (const char* text : {"{devices=[8,1]<=[8]}", "{devices=[6,1]<=[6]}", "{devices=[1,8]<=[8]}",
                           "{devices=[2,4]<=[8]}", "{replicated}", "{maximal device=3}",
                           "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"}) {
    Sharding sharding = MustParse(text);
    DataPtr data = Upload(*client, host, sharding, sharding.num_devices().value_or(8));
    ASSERT_NE(data, nullptr) << text;
    // Two guard values after the array must survive.
    std::vector<float> dst(x.size() + 2, -1.0f);
    std::span<std::byte> into = std::as_writable_bytes(std::span<float>(dst.data(), x.size()));
    ASSERT_TRUE(client->TransferFromDevice({&data, 1}, {&into, 1}).ok()) << text;
    EXPECT_EQ(std::vector<float>(dst.begin(), dst.begin() + x.size()), x) << text;
    EXPECT_EQ(dst[x.size()], -1.0f) << text;
    EXPECT_EQ(dst[x.size() + 1], -1.0f) << text;
  }
  DataPtr data = Upload(*client, host, MustParse("{devices=[8,1]<=[8]}"), 8);
  std::vector<float> small(x.size() - 1);
  std::span<std::byte> into = std::as_writable_bytes(std::span<float>(small));
  absl::Status wrong_size = client->TransferFromDevice({&data, 1}, {&into, 1});
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_size.message()),
              ::testing::HasSubstr("destination 0 has 636 bytes, f32[16,10] needs 640"));
  absl::Status wrong_count = client->TransferFromDevice({&data, 1}, {});
  EXPECT_EQ(wrong_count.code(), absl::StatusCode::kInvalidArgument);
  DataPtr null_data;
  EXPECT_EQ(client->TransferFromDevice({&null_data, 1}, {&into, 1}).code(),
            absl::StatusCode::kInvalidArgument);
}

// TransferToDevice returns only once the caller's memory is no longer needed, whichever way
// the plugin is asked to copy it (during the call for a lone shard on the CPU platform, else
// asynchronously, awaited): the memory overwritten and freed right after, the device keeps
// the values.
TEST(TransferTest, CallerMemoryIsFreeOnceTheTransferReturns) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  const std::vector<float> x = RandomFloats(1 << 16, 31);  // 256 KiB
  for (const char* text : {"{replicated}", "{devices=[8,1]<=[8]}", "{devices=[4,2]<=[8]}"}) {
    Sharding sharding = MustParse(text);
    const int devices = static_cast<int>(sharding.num_devices().value_or(1));
    auto layout = client->MakeLayout({ElementType::kF32, {256, 256}}, sharding,
                                     *client->DefaultDevices(devices));
    ASSERT_TRUE(layout.ok()) << text << ": " << layout.status();
    // 64-byte aligned, as a plugin needs to alias host memory instead of copying it.
    std::unique_ptr<float[]> memory(new (std::align_val_t{64}) float[x.size()]);
    std::copy(x.begin(), x.end(), memory.get());
    const HostArrayView view{ElementType::kF32, {256, 256},
                             std::as_bytes(std::span<const float>(memory.get(), x.size()))};
    auto one = client->TransferToDevice(view, *layout);
    const HostArrayView views[] = {view, view};
    const std::shared_ptr<const DataLayout> layouts[] = {*layout, *layout};
    auto listed = client->TransferToDevice(views, layouts);
    std::fill(memory.get(), memory.get() + x.size(), -1.0f);
    ::operator delete[](memory.release(), std::align_val_t{64});
    ASSERT_TRUE(one.ok()) << text << ": " << one.status();
    ASSERT_TRUE(listed.ok()) << text << ": " << listed.status();
    EXPECT_EQ(Values<float>(Download(*client, *one)), x) << text;
    for (const DataPtr& d : *listed) EXPECT_EQ(Values<float>(Download(*client, d)), x) << text;
  }
}

// An array that does not fit its layout is refused, naming what differs, by the one-array
// form (whose row-split layouts go up straight from the caller's memory) and the list form
// alike, and nothing is uploaded.
TEST(TransferTest, UploadsThatDoNotFitTheLayoutAreClearErrors) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  std::vector<float> x(16 * 10, 1.5f);
  const HostArrayView good{ElementType::kF32, {16, 10}, std::as_bytes(std::span<const float>(x))};
  const int64_t uploads_before = GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime)->TotalSamples();
  for (const char* text : {"{devices=[8,1]<=[8]}", "{devices=[1,8]<=[8]}", "{replicated}"}) {
    auto layout = client->MakeLayout({ElementType::kF32, {16, 10}}, MustParse(text));
    ASSERT_TRUE(layout.ok()) << layout.status();
    HostArrayView wrong_type = good;
    wrong_type.type = ElementType::kS32;
    HostArrayView wrong_dims = good;
    wrong_dims.dims = {10, 16};
    HostArrayView short_data = good;
    short_data.data = good.data.first(good.data.size() - 4);
    for (const auto& [view, expected] :
         std::vector<std::pair<HostArrayView, std::string>>{
             {wrong_type, "array 0 is s32[16,10] but its layout expects f32[16,10]"},
             {wrong_dims, "array 0 is f32[10,16] but its layout expects f32[16,10]"},
             {short_data, "array 0 has 636 bytes, expected 640"}}) {
      auto one = client->TransferToDevice(view, *layout);
      EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument) << text;
      EXPECT_THAT(std::string(one.status().message()), ::testing::HasSubstr(expected)) << text;
      const HostArrayView views[] = {good, view};
      const std::shared_ptr<const DataLayout> layouts[] = {*layout, *layout};
      auto listed = client->TransferToDevice(views, layouts);
      EXPECT_EQ(listed.status().code(), absl::StatusCode::kInvalidArgument) << text;
      EXPECT_THAT(std::string(listed.status().message()),
                  ::testing::HasSubstr(absl::StrReplaceAll(expected, {{"array 0", "array 1"}})))
          << text;
    }
  }
  auto null_one = client->TransferToDevice(good, nullptr);
  EXPECT_EQ(null_one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(null_one.status().message()), ::testing::HasSubstr("layout is null"));
  const std::shared_ptr<const DataLayout> no_layout[] = {nullptr};
  auto null_listed = client->TransferToDevice({&good, 1}, no_layout);
  EXPECT_THAT(std::string(null_listed.status().message()),
              ::testing::HasSubstr("layout 0 is null"));
  // A failed upload records no sample; a good one after them all still works.
  EXPECT_EQ(GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime)->TotalSamples(), uploads_before);
  auto layout = client->MakeLayout({ElementType::kF32, {16, 10}}, MustParse("{devices=[8,1]<=[8]}"));
  ASSERT_TRUE(layout.ok());
  auto data = client->TransferToDevice(good, *layout);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(Values<float>(Download(*client, *data)), x);
}

}  // namespace
}  // namespace shardrt

namespace shardrt {
namespace {

using namespace shardrt::testing;

TEST(ExecuteComputationTest, SingleDeviceProgram) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  ComputationPtr c = CompileTestProgram(*client, "single_device_axpy.mlir", 1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->num_devices(), 1u);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, b = {0.5f, -1, 0, 2, 3, -4};
  DataPtr da = Upload(*client, MakeArray(ElementType::kF32, {}, std::vector<float>{3}),
                      Sharding::Replicated(), 1);
  DataPtr dx = Upload(*client, MakeArray(ElementType::kF32, {6}, x), Sharding::Replicated(), 1);
  DataPtr db = Upload(*client, MakeArray(ElementType::kF32, {6}, b), Sharding::Replicated(), 1);
  auto out = client->ExecuteComputation(*c, {da, dx, db});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  std::vector<float> y = Values<float>(Download(*client, (*out)[0]));
  ASSERT_EQ(y.size(), x.size());
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], 3 * x[i] + b[i]);
  // An SPMD computation is refused by ExecuteComputation with a pointer to ExecuteReplicated.
  ComputationPtr spmd = CompileTestProgram(*client, "donate_add_one.mlir", 8);
  ASSERT_NE(spmd, nullptr);
  auto refused = client->ExecuteComputation(*spmd, {dx});
  EXPECT_NE(refused.status().message().find("use ExecuteReplicated"), absl::string_view::npos);
}

TEST(TransferTest, ShardsTheCallerAlreadyHoldsGoUpAsOneArray) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  // 10 rows over 4 devices: per-device padded shards of 3 rows; the last holds row 9 + padding.
  auto devices = client->DefaultDevices(4);
  ASSERT_TRUE(devices.ok());
  auto layout = client->MakeLayout({ElementType::kS32, {10, 2}}, MustParse("{devices=[4,1]<=[4]}"),
                                   *devices);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<std::vector<int32_t>> shards(4, std::vector<int32_t>(6, 0));
  for (int row = 0; row < 10; ++row) {
    for (int col = 0; col < 2; ++col) shards[row / 3][(row % 3) * 2 + col] = row * 10 + col;
  }
  std::vector<std::span<const std::byte>> spans;
  for (auto& s : shards) spans.push_back(std::as_bytes(std::span(s)));
  auto data = client->TransferShardsToDevice(*layout, spans);
  ASSERT_TRUE(data.ok()) << data.status();
  std::vector<int32_t> global = Values<int32_t>(Download(*client, *data));
  ASSERT_EQ(global.size(), 20u);
  for (int row = 0; row < 10; ++row) {
    for (int col = 0; col < 2; ++col) EXPECT_EQ(global[row * 2 + col], row * 10 + col);
  }
  // A shard of the wrong size is an error naming the device.
  spans[2] = spans[2].first(8);
  auto bad = client->TransferShardsToDevice(*layout, spans);
  EXPECT_NE(bad.status().message().find("shard for device 2 has 8 bytes, expected 24"),
            absl::string_view::npos)
      << bad.status();
}

// AssembleFromShards: each device's shard is produced into zeroed host pages on the pool and
// uploaded; the global array read back is the one the shards describe (uneven: 10 rows over 4
// devices, 2D tiles over 8), a replicated layout's shard is produced once, and a producer's
// error ends the assembly with that error.
TEST(TransferTest, ShardsProducedOnThePoolAssembleOneArray) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  auto devices = client->DefaultDevices(8);
  ASSERT_TRUE(devices.ok());
  // Rows split over 4 devices, columns over 2: device d = 2 * row block + column block holds
  // rows [3 * (d / 2), ...) (3, 3, 3, 1 + padding) and columns [3 * (d % 2), +3).
  auto layout = client->MakeLayout({ElementType::kS32, {10, 6}},
                                   MustParse("{devices=[4,2]<=[8]}"), *devices);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ((*layout)->shard_dims, (std::vector<int64_t>{3, 3}));
  std::atomic<int> calls = 0;
  auto data = client->AssembleFromShards(
      *layout, [&](size_t d, std::span<std::byte> into) -> absl::Status {
        ++calls;
        auto* v = reinterpret_cast<int32_t*>(into.data());
        for (size_t i = 0; i < into.size() / 4; ++i) {
          if (v[i] != 0) return absl::InternalError("pages not zeroed");
        }
        for (int r = 0; r < 3; ++r) {
          for (int c = 0; c < 3; ++c) {
            const int row = 3 * int(d / 2) + r, col = 3 * int(d % 2) + c;
            if (row < 10) v[r * 3 + c] = row * 100 + col;
          }
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(calls.load(), 8);
  std::vector<int32_t> global = Values<int32_t>(Download(*client, *data));
  ASSERT_EQ(global.size(), 60u);
  for (int row = 0; row < 10; ++row) {
    for (int col = 0; col < 6; ++col) EXPECT_EQ(global[row * 6 + col], row * 100 + col);
  }
  // Replicated: produced once, the same on every device (each device's copy read back).
  auto replicated = client->MakeLayout({ElementType::kF32, {5}}, MustParse("{replicated}"),
                                       *devices);
  ASSERT_TRUE(replicated.ok());
  calls = 0;
  auto same = client->AssembleFromShards(*replicated, [&](size_t d, std::span<std::byte> into) {
    ++calls;
    auto* v = reinterpret_cast<float*>(into.data());
    for (int i = 0; i < 5; ++i) v[i] = 0.5f * float(i) + float(d);
    return absl::OkStatus();
  });
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(calls.load(), 1);
  ASSERT_NE((*same)->buffers(), nullptr);
  ASSERT_EQ((*same)->buffers()->buffers.size(), 8u);
  for (const pjrt::Buffer& buffer : (*same)->buffers()->buffers) {
    std::vector<float> values(5, -1.0f);
    auto done = buffer.ToHost(values.data(), values.size() * sizeof(float));
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_TRUE(done->Await().ok());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(values[i], 0.5f * float(i));
  }
  // The producer's error is the assembly's.
  auto failed = client->AssembleFromShards(*layout, [](size_t d, std::span<std::byte>) {
    return d == 5 ? absl::DataLossError("shard 5 is damaged") : absl::OkStatus();
  });
  EXPECT_EQ(failed.status(), absl::DataLossError("shard 5 is damaged"));
}

}  // namespace
}  // namespace shardrt

namespace shardrt {
namespace {

using namespace shardrt::testing;

// MLIR bytecode (as JAX hands programs to PJRT) compiles too; with no text signature the global
// shapes come from the per-device shapes and shardings.
TEST(ExecuteReplicatedBytecodeTest, JaxBytecodeProgramRuns) {
  auto client = MakeClient();
  ASSERT_NE(client, nullptr);
  // Bytecode does not state its global shapes, and x is split over 8 devices: without them
  // the compile is refused (the split could be uneven), with them it runs.
  CompileRequest request;
  request.name = "scale_sum_jax";
  request.program = ReadTestData("scale_sum_jax.mlirbc");
  request.options.num_partitions = 8;
  auto refused = client->Compile(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(
                "scale_sum_jax parameter 0: the program does not state its global shape (MLIR "
                "bytecode), and the per-device shape f32[2,4] under sharding "
                "{devices=[8,1]<=[8]} does not tell it exactly"),
            absl::string_view::npos)
      << refused.status();
  request.global_shapes =
      GlobalShapes{{{ElementType::kF32, {16, 4}}}, {{ElementType::kF32, {16, 4}},
                                                    {ElementType::kF32, {4}}}};
  auto compiled = client->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ComputationPtr c = *compiled;
  EXPECT_EQ(c->parameter_layout(0)->global.dims, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(c->output_layout(1)->global.dims, (std::vector<int64_t>{4}));
  std::vector<float> x = RandomFloats(64, 11);
  DataPtr dx = Upload(*client, MakeArray(ElementType::kF32, {16, 4}, x),
                      c->parameter_layout(0)->sharding);
  auto out = client->ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<float> y = Values<float>(Download(*client, (*out)[0]));
  std::vector<float> s = Values<float>(Download(*client, (*out)[1]));
  ASSERT_EQ(y.size(), 64u);
  ASSERT_EQ(s.size(), 4u);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], 2 * x[i] + 1);
  for (int col = 0; col < 4; ++col) {
    double e = 0;
    for (int r = 0; r < 16; ++r) e += x[r * 4 + col];
    EXPECT_NEAR(s[col], e, 1e-5);
  }
}

}  // namespace
}  // namespace shardrt
