// Executor: asynchronous, ordered execution on the real plugin with 8 CPU devices, checked
// against host computations; errors, backpressure, tracing and the DeviceLockWait metric.
// Every wait (Schedule under backpressure, Await, WaitForAll, Synchronize, joins, downloads,
// the executor's destructor) has a deadline (WITH_DEADLINE): a wait that never ends fails the
// test, naming it.
#include "shardrt/executor/executor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "../../common/mini_json.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/trace.h"
#include "client/client_test_util.h"
#include "gmock/gmock.h"

namespace shardrt {
namespace {

using namespace shardrt::testing;
using ::testing::HasSubstr;

std::vector<int32_t> RandomInts(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(-1000, 1000);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// Uploads `array` with the layout of parameter `i` of `c`.
DataPtr UploadFor(ComputationClient& client, const Computation& c, size_t i,
                  const HostArray& array) {
  HostArrayView view = array.view();
  auto data = client.TransferToDevice({&view, 1}, {&c.parameter_layout(i), 1});
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return nullptr;
  EXPECT_EQ(data->size(), 1u);
  return data->size() == 1 ? (*data)[0] : nullptr;
}

// Compiles tests/testdata/<file> for the given global device ids.
ComputationPtr CompileOn(ComputationClient& client, const char* file,
                         std::vector<int64_t> device_ids) {
  CompileRequest request;
  request.name = file;
  request.program = ReadTestData(file);
  request.options.num_partitions = static_cast<int64_t>(device_ids.size());
  request.options.device_assignment = std::move(device_ids);
  auto c = client.Compile(request);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

// Schedules `c` (waiting out backpressure, with the test deadline) and returns its outputs,
// checked to be `num_outputs`; empty (a test failure) otherwise.
std::vector<DataPtr> ScheduleAll(Executor& executor, const ComputationPtr& c,
                                 std::vector<DataPtr> args, size_t num_outputs) {
  auto out = WITH_DEADLINE(executor.Schedule(c, std::move(args)));
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->size(), num_outputs);
  return out->size() == num_outputs ? std::move(*out) : std::vector<DataPtr>{};
}

DataPtr ScheduleOne(Executor& executor, const ComputationPtr& c, std::vector<DataPtr> args) {
  std::vector<DataPtr> out = ScheduleAll(executor, c, std::move(args), 1);
  return out.empty() ? nullptr : out[0];
}

std::vector<int32_t> PlusEach(std::vector<int32_t> v, int32_t k) {
  for (int32_t& x : v) x += k;
  return v;
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = MakeClient();
    ASSERT_NE(client_, nullptr);
    add_one_ = CompileTestProgram(*client_, "executor_add_one_i32.mlir", 8);
    ASSERT_NE(add_one_, nullptr);
  }
  DataPtr UploadInts(const std::vector<int32_t>& v) {
    return UploadFor(*client_, *add_one_, 0, MakeArray(ElementType::kS32, {16, 4}, v));
  }
  std::vector<int32_t> DownloadInts(const DataPtr& d) {
    return Values<int32_t>(Download(*client_, d));
  }

  TestRuntime client_;
  ComputationPtr add_one_;
};

TEST_F(ExecutorTest, ChainOf1000DependentStepsGivesTheHostResult) {
  Executor executor(client_.get(), {.max_in_flight = 64});
  const std::vector<int32_t> x0 = RandomInts(64, 1);
  DataPtr x = UploadInts(x0);
  std::vector<DataPtr> steps;
  for (int i = 0; i < 1000; ++i) {
    x = ScheduleOne(executor, add_one_, {x});
    ASSERT_NE(x, nullptr);
    if (i % 100 == 99) steps.push_back(x);
  }
  ASSERT_OK_WITHIN(executor.WaitForAll());
  EXPECT_EQ(x->state(), Data::State::kReady);
  EXPECT_EQ(DownloadInts(x), PlusEach(x0, 1000));
  // Intermediate placeholders hold their own step's value.
  for (size_t k = 0; k < steps.size(); ++k) {
    EXPECT_EQ(DownloadInts(steps[k]), PlusEach(x0, static_cast<int32_t>(100 * (k + 1))));
  }
  ASSERT_OK_WITHIN(executor.Synchronize());
  ExecutorStats s = executor.stats();
  EXPECT_EQ(s.scheduled, 1000);
  EXPECT_EQ(s.dispatched, 1000);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.device_pending, 0);
}

// A chain whose every step depends on where each row sits (y = x * (row + 1)): after 3 steps
// y = x * (row + 1)^3, which a shard on the wrong device would change.
TEST_F(ExecutorTest, PositionDependentChainGivesTheHostResult) {
  ComputationPtr weighted = CompileOn(*client_, "position_weighted.mlir", {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_NE(weighted, nullptr);
  std::vector<float> x(18 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  DataPtr value = UploadFor(*client_, *weighted, 0, MakeArray(ElementType::kF32, {18, 4}, x));
  Executor executor(client_.get());
  DataPtr sums;
  for (int step = 0; step < 3; ++step) {
    std::vector<DataPtr> out = ScheduleAll(executor, weighted, {value}, 2);
    ASSERT_EQ(out.size(), 2u);
    value = out[0];
    sums = out[1];
  }
  ASSERT_OK_WITHIN(executor.WaitForAll());
  std::vector<float> y = Values<float>(Download(*client_, value));
  std::vector<float> s = Values<float>(Download(*client_, sums));
  ASSERT_EQ(y.size(), x.size());
  ASSERT_EQ(s.size(), 4u);
  for (int r = 0; r < 18; ++r) {
    const double w = static_cast<double>(r + 1);
    for (int c = 0; c < 4; ++c) {
      EXPECT_NEAR(y[r * 4 + c], x[r * 4 + c] * w * w * w, 1e-3 * w * w * w);
    }
  }
  for (int c = 0; c < 4; ++c) {  // the last step's sums: of x * (row + 1)^3
    double e = 0;
    for (int r = 0; r < 18; ++r) e += double{x[r * 4 + c]} * (r + 1) * (r + 1) * (r + 1);
    EXPECT_NEAR(s[c], e, 1e-2);
  }
}

TEST_F(ExecutorTest, DonatingChainOf1000Steps) {
  ComputationPtr donate = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(donate, nullptr);
  ASSERT_TRUE(donate->donates_parameter(0));
  Executor executor(client_.get());
  std::vector<float> x0(64);
  for (size_t i = 0; i < x0.size(); ++i) x0[i] = static_cast<float>(i) - 20.0f;
  DataPtr first = UploadFor(*client_, *donate, 0, MakeArray(ElementType::kF32, {16, 4}, x0));
  DataPtr x = first;
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 1000; ++i) {
    x = ScheduleOne(executor, donate, {x});
    ASSERT_NE(x, nullptr);
  }
  ASSERT_OK_WITHIN(executor.Synchronize());
  EXPECT_EQ(first->state(), Data::State::kDonated);
  std::vector<float> y = Values<float>(Download(*client_, x));
  ASSERT_EQ(y.size(), x0.size());
  for (size_t i = 0; i < x0.size(); ++i) EXPECT_EQ(y[i], x0[i] + 1000.0f);  // exact in f32
}

TEST_F(ExecutorTest, RunsAheadOfAnUnfilledPlaceholderAndWaitsForIt) {
  Executor executor(client_.get());
  DataPtr source = client_->CreateDataPlaceholder(add_one_->parameter_layout(0));
  std::vector<DataPtr> outs;
  DataPtr x = source;
  for (int i = 0; i < 10; ++i) {
    x = ScheduleOne(executor, add_one_, {x});
    ASSERT_NE(x, nullptr);
    outs.push_back(x);
  }
  // Nothing can run yet: every output is still a placeholder.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const DataPtr& o : outs) EXPECT_EQ(o->state(), Data::State::kPending);
  EXPECT_EQ(executor.stats().in_flight, 10);
  EXPECT_EQ(executor.stats().dispatched, 0);

  const std::vector<int32_t> x0 = RandomInts(64, 2);
  DataPtr filled = UploadInts(x0);
  ASSERT_TRUE(source->Assign(filled).ok());
  ASSERT_OK_WITHIN(x->Await());
  EXPECT_EQ(DownloadInts(x), PlusEach(x0, 10));
  EXPECT_EQ(DownloadInts(outs[3]), PlusEach(x0, 4));
  EXPECT_OK_WITHIN(executor.WaitForAll());
}

// Outputs of one execution with the same shape, type and sharding but other values, and a
// second execution on one of them: each placeholder gets its own output.
TEST_F(ExecutorTest, OutputsOfTheSameLayoutFillTheirOwnPlaceholders) {
  ComputationPtr c = CompileTestProgram(*client_, kSameLayoutOutputsProgram, 8);
  ASSERT_NE(c, nullptr);
  Executor executor(client_.get());
  DataPtr source = client_->CreateDataPlaceholder(c->parameter_layout(0));
  std::vector<DataPtr> first = ScheduleAll(executor, c, {source}, 4);
  ASSERT_EQ(first.size(), 4u);
  std::vector<DataPtr> second = ScheduleAll(executor, c, {first[2]}, 4);  // on x - 3
  ASSERT_EQ(second.size(), 4u);
  const std::vector<float> x = SameLayoutOutputsInput();
  DataPtr value = UploadFor(*client_, *c, 0, MakeArray(ElementType::kF32, {16, 4}, x));
  ASSERT_NE(value, nullptr);
  ASSERT_TRUE(source->Assign(value).ok());
  ASSERT_OK_WITHIN(executor.WaitForAll());
  ExpectSameLayoutOutputs(*client_, first, x);
  ExpectSameLayoutOutputs(*client_, second, SameLayoutOutputsInput(-3.0f));
}

TEST_F(ExecutorTest, SameDeviceSetRunsInScheduleOrder) {
  // scale reads x; donate consumes x. Whichever is scheduled first runs first, so the reader
  // succeeds only when it comes first.
  ComputationPtr donate = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ComputationPtr scale = CompileTestProgram(*client_, "executor_scale_f32.mlir", 8);
  ASSERT_NE(donate, nullptr);
  ASSERT_NE(scale, nullptr);
  Executor executor(client_.get());
  std::vector<float> v(64, 3.0f);
  for (int round = 0; round < 20; ++round) {
    // Both wait on the same unfilled placeholder, so neither can start before both are queued.
    DataPtr x = client_->CreateDataPlaceholder(donate->parameter_layout(0));
    const bool reader_first = round % 2 == 0;
    DataPtr read, consumed;
    if (reader_first) {
      read = ScheduleOne(executor, scale, {x});
      consumed = ScheduleOne(executor, donate, {x});
    } else {
      consumed = ScheduleOne(executor, donate, {x});
      read = ScheduleOne(executor, scale, {x});
    }
    ASSERT_NE(read, nullptr);
    ASSERT_NE(consumed, nullptr);
    DataPtr value = UploadFor(*client_, *donate, 0, MakeArray(ElementType::kF32, {16, 4}, v));
    ASSERT_TRUE(x->Assign(value).ok());
    value.reset();
    EXPECT_OK_WITHIN(consumed->Await());
    absl::Status r = WITH_DEADLINE(read->Await());
    if (reader_first) {
      EXPECT_TRUE(r.ok()) << r;
      EXPECT_EQ(Values<float>(Download(*client_, read)), std::vector<float>(64, 6.0f));
    } else {
      EXPECT_EQ(r.code(), absl::StatusCode::kFailedPrecondition) << r;
      EXPECT_THAT(std::string(r.message()), HasSubstr("donated"));
    }
    EXPECT_EQ(Values<float>(Download(*client_, consumed)), std::vector<float>(64, 4.0f));
    absl::Status all = WITH_DEADLINE(executor.WaitForAll());
    EXPECT_EQ(all.ok(), reader_first) << all;
  }
}

TEST_F(ExecutorTest, DisjointDeviceSetsRunIndependently) {
  ComputationPtr low = CompileOn(*client_, "executor_add_one_i32_4dev.mlir", {0, 1, 2, 3});
  ComputationPtr high = CompileOn(*client_, "executor_add_one_i32_4dev.mlir", {4, 5, 6, 7});
  ASSERT_NE(low, nullptr);
  ASSERT_NE(high, nullptr);
  // Room for both chains: the low one stays in flight until its placeholder is filled.
  Executor executor(client_.get(), {.max_in_flight = 128});
  // The low chain waits on an unfilled placeholder; the high chain must still run to the end.
  DataPtr low_source = client_->CreateDataPlaceholder(low->parameter_layout(0));
  const std::vector<int32_t> a = RandomInts(64, 3), b = RandomInts(64, 4);
  DataPtr lx = low_source;
  DataPtr hx = UploadFor(*client_, *high, 0, MakeArray(ElementType::kS32, {16, 4}, b));
  for (int i = 0; i < 50; ++i) {
    lx = ScheduleOne(executor, low, {lx});
    hx = ScheduleOne(executor, high, {hx});
    ASSERT_NE(lx, nullptr);
    ASSERT_NE(hx, nullptr);
  }
  ASSERT_OK_WITHIN(hx->Await());
  EXPECT_EQ(lx->state(), Data::State::kPending);
  EXPECT_EQ(Values<int32_t>(Download(*client_, hx)), PlusEach(b, 50));
  DataPtr la = UploadFor(*client_, *low, 0, MakeArray(ElementType::kS32, {16, 4}, a));
  ASSERT_TRUE(low_source->Assign(la).ok());
  ASSERT_OK_WITHIN(executor.WaitForAll());
  EXPECT_EQ(Values<int32_t>(Download(*client_, lx)), PlusEach(a, 50));
}

TEST_F(ExecutorTest, SeveralProducerThreadsWithCollectives) {
  ComputationPtr step = CompileTestProgram(*client_, "executor_step_allreduce.mlir", 8);
  ASSERT_NE(step, nullptr);
  Executor executor(client_.get(), {.max_in_flight = 8});
  constexpr int kThreads = 4;
  constexpr int kSteps = 100;
  std::vector<std::thread> producers;
  std::vector<std::vector<int32_t>> x0(kThreads);
  std::vector<DataPtr> final_x(kThreads), final_acc(kThreads), final_plus(kThreads);
  for (int t = 0; t < kThreads; ++t) x0[t] = RandomInts(64, 10 + t);
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      DataPtr x = UploadFor(*client_, *step, 0, MakeArray(ElementType::kS32, {16, 4}, x0[t]));
      DataPtr acc = UploadFor(*client_, *step, 1,
                              MakeArray(ElementType::kS32, {4}, std::vector<int32_t>(4, 0)));
      DataPtr y = x;
      for (int i = 0; i < kSteps; ++i) {
        std::vector<DataPtr> out = ScheduleAll(executor, step, {x, acc}, 2);
        ASSERT_EQ(out.size(), 2u);
        x = out[0];
        acc = out[1];
        // A second program on the same devices, interleaved.
        y = ScheduleOne(executor, add_one_, {y});
      }
      final_x[t] = x;
      final_acc[t] = acc;
      final_plus[t] = y;
    });
  }
  for (std::thread& p : producers) WITH_DEADLINE(p.join());
  ASSERT_OK_WITHIN(executor.Synchronize());
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(DownloadInts(final_x[t]), PlusEach(x0[t], kSteps));
    EXPECT_EQ(DownloadInts(final_plus[t]), PlusEach(x0[t], kSteps));
    // acc = sum over steps k of the column sums of x0 + k.
    std::vector<int32_t> expected(4, 0);
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 4; ++c) expected[c] += x0[t][r * 4 + c];
    }
    for (int c = 0; c < 4; ++c) expected[c] = expected[c] * kSteps + 16 * kSteps * (kSteps - 1) / 2;
    EXPECT_EQ(Values<int32_t>(Download(*client_, final_acc[t])), expected) << "thread " << t;
  }
  EXPECT_EQ(executor.stats().dispatched, 2 * kThreads * kSteps);
  EXPECT_EQ(executor.stats().failed, 0);
}

TEST_F(ExecutorTest, FailedArgumentFailsTheChainWithTheOriginalErrorThenRecovers) {
  Executor executor(client_.get(), {.max_in_flight = 64});
  DataPtr source = client_->CreateDataPlaceholder(add_one_->parameter_layout(0));
  DataPtr x = source;
  std::vector<DataPtr> chain;
  for (int i = 0; i < 20; ++i) {
    x = ScheduleOne(executor, add_one_, {x});
    ASSERT_NE(x, nullptr);
    chain.push_back(x);
  }
  // An unrelated execution scheduled in between.
  const std::vector<int32_t> v = RandomInts(64, 5);
  DataPtr unrelated = ScheduleOne(executor, add_one_, {UploadInts(v)});
  source->Fail(absl::DataLossError("sensor 7 went dark"));

  absl::Status all = WITH_DEADLINE(executor.WaitForAll());
  EXPECT_EQ(all.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(all.message(), "sensor 7 went dark");
  for (const DataPtr& d : chain) {
    EXPECT_EQ(d->state(), Data::State::kFailed);
    absl::Status s = WITH_DEADLINE(d->Await());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(s.message(), "sensor 7 went dark");
  }
  // Reading a failed placeholder returns the error.
  auto host = client_->TransferFromDevice({&chain.back(), 1});
  EXPECT_EQ(host.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(host.status().message()), HasSubstr("sensor 7 went dark"));
  // Scheduling on failed data fails the new execution with the same error.
  DataPtr again = ScheduleOne(executor, add_one_, {chain.back()});
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(WITH_DEADLINE(again->Await()).message(), "sensor 7 went dark");
  EXPECT_EQ(WITH_DEADLINE(executor.WaitForAll()).code(), absl::StatusCode::kDataLoss);

  // The unrelated execution ran; later executions work; the error was reported once.
  EXPECT_EQ(DownloadInts(unrelated), PlusEach(v, 1));
  DataPtr later = ScheduleOne(executor, add_one_, {UploadInts(v)});
  later = ScheduleOne(executor, add_one_, {later});
  EXPECT_OK_WITHIN(executor.Synchronize());
  EXPECT_EQ(DownloadInts(later), PlusEach(v, 2));
  EXPECT_EQ(executor.stats().failed, 21);
}

TEST_F(ExecutorTest, ExecutionFailingAtRunTimeThenRecovery) {
  ComputationPtr donate = CompileTestProgram(*client_, "donate_add_one.mlir", 8);
  ASSERT_NE(donate, nullptr);
  Executor executor(client_.get());
  std::vector<float> v(64, 1.5f);
  DataPtr x = UploadFor(*client_, *donate, 0, MakeArray(ElementType::kF32, {16, 4}, v));
  // The second execution gets data the first one donated: it fails when it runs.
  DataPtr first = ScheduleOne(executor, donate, {x});
  DataPtr second = ScheduleOne(executor, donate, {x});
  DataPtr dependent = ScheduleOne(executor, donate, {second});
  // A layout the program does not take (replicated instead of row-sharded): also a run-time
  // error, with ExecuteReplicated's message.
  DataPtr wrong = Upload(*client_, MakeArray(ElementType::kF32, {16, 4}, v),
                         Sharding::Replicated());
  DataPtr mismatched = ScheduleOne(executor, donate, {wrong});
  for (const DataPtr& d : {first, second, dependent, mismatched}) ASSERT_NE(d, nullptr);

  absl::Status s = WITH_DEADLINE(second->Await());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("donated"));
  EXPECT_EQ(WITH_DEADLINE(dependent->Await()), s);
  absl::Status m = WITH_DEADLINE(mismatched->Await());
  EXPECT_EQ(m.code(), absl::StatusCode::kInvalidArgument) << m;
  EXPECT_THAT(std::string(m.message()), HasSubstr("argument 0 expected"));
  EXPECT_EQ(WITH_DEADLINE(executor.WaitForAll()), s);  // the first failure
  EXPECT_OK_WITHIN(executor.WaitForAll());

  ASSERT_OK_WITHIN(first->Await());
  DataPtr next = ScheduleOne(executor, donate, {first});
  EXPECT_OK_WITHIN(executor.Synchronize());
  EXPECT_EQ(Values<float>(Download(*client_, next)), std::vector<float>(64, 3.5f));
  EXPECT_EQ(executor.stats().failed, 3);
}

TEST_F(ExecutorTest, ScheduleChecksItsArguments) {
  Executor executor(client_.get());
  EXPECT_EQ(executor.Schedule(nullptr, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor.Schedule(add_one_, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor.Schedule(add_one_, {nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor.stats().scheduled, 0);
}

TEST_F(ExecutorTest, BackpressureBoundsExecutionsInFlight) {
  Executor executor(client_.get(), {.max_in_flight = 2});
  DataPtr source = client_->CreateDataPlaceholder(add_one_->parameter_layout(0));
  DataPtr a = ScheduleOne(executor, add_one_, {source});
  DataPtr b = ScheduleOne(executor, add_one_, {a});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(executor.stats().in_flight, 2);
  auto refused = executor.TrySchedule(add_one_, {b});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);

  std::atomic<bool> returned{false};
  DataPtr c;
  std::thread producer([&] {
    c = ScheduleOne(executor, add_one_, {b});
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());  // blocked: two in flight
  const std::vector<int32_t> x0 = RandomInts(64, 6);
  ASSERT_TRUE(source->Assign(UploadInts(x0)).ok());
  WITH_DEADLINE(producer.join());
  EXPECT_TRUE(returned.load());
  ASSERT_OK_WITHIN(executor.WaitForAll());
  EXPECT_EQ(DownloadInts(c), PlusEach(x0, 3));
  EXPECT_EQ(executor.stats().scheduled, 3);
}

TEST_F(ExecutorTest, DestructionCancelsExecutionsWaitingForUnfilledPlaceholders) {
  DataPtr source = client_->CreateDataPlaceholder(add_one_->parameter_layout(0));
  const std::vector<int32_t> v = RandomInts(64, 7);
  DataPtr waiting, done;
  auto executor = std::make_unique<Executor>(client_.get());
  waiting = ScheduleOne(*executor, add_one_, {source});
  waiting = ScheduleOne(*executor, add_one_, {waiting});
  done = ScheduleOne(*executor, add_one_, {UploadInts(v)});
  WITH_DEADLINE(executor.reset());  // the destructor waits, then cancels
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->state(), Data::State::kFailed);
  EXPECT_EQ(WITH_DEADLINE(waiting->Await()).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(DownloadInts(done), PlusEach(v, 1));
  // Filling the placeholder afterwards is harmless.
  EXPECT_TRUE(source->Assign(UploadInts(v)).ok());
}

TEST_F(ExecutorTest, DeviceLockWaitHasSamplesAfterARun) {
  Metric* lock_wait = GlobalMetrics().GetMetric(kDeviceLockWait, MetricRepr::kTime);
  ASSERT_NE(lock_wait, nullptr);
  const int64_t before = lock_wait->TotalSamples();
  Executor executor(client_.get());
  DataPtr x = UploadInts(RandomInts(64, 8));
  for (int i = 0; i < 50; ++i) x = ScheduleOne(executor, add_one_, {x});
  ASSERT_OK_WITHIN(executor.WaitForAll());
  EXPECT_EQ(lock_wait->TotalSamples() - before, 50);
  std::string report = GlobalMetrics().TextReport();
  EXPECT_THAT(report, HasSubstr("Metric: DeviceLockWait\n  TotalSamples: "));
  const size_t at = report.find("Metric: DeviceLockWait");
  ASSERT_NE(at, std::string::npos);
  const size_t end = report.find("Metric:", at + 1);
  std::printf("%s", report.substr(at, end == std::string::npos ? end : end - at).c_str());
}

// The trace of a run: a fresh client (so Compile runs), uploads, a chain, a download.
TEST(ExecutorTraceTest, TraceFileIsValidJsonWithTheExpectedSpans) {
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.Start().ok());
  SetTraceThreadName("test main");
  TestRuntime client = MakeClient();
  ASSERT_NE(client, nullptr);
  ComputationPtr step = CompileTestProgram(*client, "executor_step_allreduce.mlir", 8);
  ASSERT_NE(step, nullptr);
  std::vector<int32_t> x0 = RandomInts(64, 9);
  DataPtr x = UploadFor(*client, *step, 0, MakeArray(ElementType::kS32, {16, 4}, x0));
  DataPtr acc =
      UploadFor(*client, *step, 1, MakeArray(ElementType::kS32, {4}, std::vector<int32_t>(4)));
  constexpr int kSteps = 20;
  {
    Executor executor(client.get());
    for (int i = 0; i < kSteps; ++i) {
      std::vector<DataPtr> out = ScheduleAll(executor, step, {x, acc}, 2);
      ASSERT_EQ(out.size(), 2u);
      x = out[0];
      acc = out[1];
    }
    ASSERT_OK_WITHIN(executor.Synchronize());
  }
  EXPECT_EQ(Values<int32_t>(Download(*client, x)), PlusEach(x0, kSteps));
  recorder.Stop();

  // SHARDRT_TEST_TRACE_OUT=FILE keeps the trace for a look in Perfetto.
  const char* keep = std::getenv("SHARDRT_TEST_TRACE_OUT");
  const std::string path =
      keep != nullptr ? std::string(keep)
                      : ::testing::TempDir() + "/executor_trace_" + std::to_string(getpid()) +
                            ".json";
  ASSERT_TRUE(recorder.WriteJson(path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (keep == nullptr) std::remove(path.c_str());
  JsonValue trace;
  std::string error;
  ASSERT_TRUE(JsonParser::Parse(text.str(), &trace, &error)) << error;
  ASSERT_EQ(trace["traceEvents"].kind, JsonValue::Kind::kArray);

  std::map<std::string, int> spans, async_begins, async_ends;
  std::map<int, std::string> thread_names;
  std::map<int, std::vector<const JsonValue*>> by_thread;
  for (const JsonValue& e : trace["traceEvents"].array) {
    const std::string& ph = e["ph"].string;
    if (ph == "X") {
      ++spans[e["name"].string];
      EXPECT_GE(e["dur"].number, 0);
      by_thread[static_cast<int>(e["tid"].number)].push_back(&e);
    } else if (ph == "b") {
      ++async_begins[e["name"].string];
    } else if (ph == "e") {
      ++async_ends[e["name"].string];
    } else if (ph == "M" && e["name"].string == "thread_name") {
      thread_names[static_cast<int>(e["tid"].number)] = e["args"]["name"].string;
    }
  }
  for (const auto& [name, count] : spans) std::printf("span %-20s %d\n", name.c_str(), count);
  for (const auto& [name, count] : async_begins) {
    std::printf("async %-19s %d\n", name.c_str(), count);
  }
  EXPECT_EQ(spans["Compile"], 1);
  EXPECT_EQ(spans["TransferToDevice"], 2);
  EXPECT_EQ(spans["TransferFromDevice"], 1);
  EXPECT_EQ(spans["Schedule"], kSteps);
  EXPECT_EQ(spans["Execution"], kSteps);
  EXPECT_EQ(spans["ExecuteReplicated"], kSteps);
  EXPECT_EQ(spans["ArgumentPlumbing"], kSteps);
  EXPECT_EQ(spans["PjrtExecute"], kSteps);
  EXPECT_EQ(spans["OutputWrapping"], kSteps);
  EXPECT_EQ(spans["AssignOutputs"], kSteps);
  EXPECT_EQ(async_begins["DeviceLockWait"], kSteps);
  EXPECT_EQ(async_ends["DeviceLockWait"], kSteps);
  EXPECT_EQ(async_begins["InputWait"], kSteps);
  bool named_pool_thread = false;
  for (const auto& [tid, name] : thread_names) {
    named_pool_thread |= name.rfind("shardrt pool ", 0) == 0;
  }
  EXPECT_TRUE(named_pool_thread);
  EXPECT_TRUE(std::any_of(thread_names.begin(), thread_names.end(),
                          [](const auto& p) { return p.second == "test main"; }));

  // Spans nest on their thread: each PjrtExecute lies within an ExecuteReplicated, which lies
  // within an Execution.
  auto contained = [](const JsonValue& inner, const JsonValue& outer) {
    const double eps = 0.002;  // microseconds, rounding of the 3-decimal output
    return inner["ts"].number >= outer["ts"].number - eps &&
           inner["ts"].number + inner["dur"].number <=
               outer["ts"].number + outer["dur"].number + eps;
  };
  int checked = 0;
  for (const auto& [tid, events] : by_thread) {
    for (const JsonValue* e : events) {
      if ((*e)["name"].string != "PjrtExecute") continue;
      bool in_execute = false, in_execution = false;
      for (const JsonValue* o : events) {
        if ((*o)["name"].string == "ExecuteReplicated") in_execute |= contained(*e, *o);
        if ((*o)["name"].string == "Execution") in_execution |= contained(*e, *o);
      }
      EXPECT_TRUE(in_execute && in_execution);
      ++checked;
    }
  }
  EXPECT_EQ(checked, kSteps);
}

}  // namespace
}  // namespace shardrt
