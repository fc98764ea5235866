#include "shardrt/base/metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(FormatMetricValueTest, Time) {
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 2'619'632'615.0), "02s619ms632.615us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 632'615.0), "632.615us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 5'000.0), "005.000us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 0.0), "000.000us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 1'000'000.0), "001ms000.000us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 2'999'999'999.0), "02s999ms999.999us");
  // 1 d 1 h 1 m 1 s 1 ms 1.001 us
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 90'061'001'001'001.0),
            "01d01h01m01s001ms001.001us");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kTime, 3'600'000'000'000.0),
            "01h00m00s000ms000.000us");
}

TEST(FormatMetricValueTest, Bytes) {
  EXPECT_EQ(FormatMetricValue(MetricRepr::kBytes, 512.0), "512.00B");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kBytes, 1024.0), "1.00KB");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kBytes, 1.5 * 1024 * 1024), "1.50MB");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kBytes, 3.0 * 1024 * 1024 * 1024), "3.00GB");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kBytes, 2048.0 * 1024 * 1024 * 1024 * 1024 * 1024),
            "2048.00PB");
}

TEST(FormatMetricValueTest, Number) {
  EXPECT_EQ(FormatMetricValue(MetricRepr::kNumber, 12.5), "12.50");
  EXPECT_EQ(FormatMetricValue(MetricRepr::kNumber, 0.0), "0.00");
}

TEST(MetricTest, PercentilesOverKnownSamples) {
  MetricSnapshot snapshot;
  std::vector<double> values(100);
  std::iota(values.begin(), values.end(), 1.0);  // 1..100
  std::shuffle(values.begin(), values.end(), std::mt19937(7));
  for (size_t i = 0; i < values.size(); ++i) {
    snapshot.samples.push_back({static_cast<int64_t>(i), values[i]});
  }
  snapshot.total_samples = 100;
  snapshot.accumulator = 5050;
  const std::vector<double> fractions = {0.01, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95, 0.99};
  MetricStats stats = ComputeMetricStats(snapshot, fractions);
  // Element floor(p * n) of the sorted values: value = index + 1.
  EXPECT_THAT(stats.percentiles,
              ElementsAre(Pair(0.01, 2.0), Pair(0.05, 6.0), Pair(0.1, 11.0), Pair(0.2, 21.0),
                          Pair(0.5, 51.0), Pair(0.8, 81.0), Pair(0.9, 91.0), Pair(0.95, 96.0),
                          Pair(0.99, 100.0)));
  // The window spans 99 ns.
  ASSERT_TRUE(stats.rate.has_value());
  EXPECT_DOUBLE_EQ(*stats.rate, 100.0 / 99e-9);
  EXPECT_DOUBLE_EQ(*stats.value_rate, 5050.0 / 99e-9);
}

TEST(MetricTest, SingleSampleHasNoRate) {
  MetricSnapshot snapshot{1, 4.0, {{10, 4.0}}};
  MetricStats stats = ComputeMetricStats(snapshot, std::vector<double>{0.5, 0.99});
  EXPECT_FALSE(stats.rate.has_value());
  EXPECT_FALSE(stats.value_rate.has_value());
  EXPECT_THAT(stats.percentiles, ElementsAre(Pair(0.5, 4.0), Pair(0.99, 4.0)));
}

TEST(MetricTest, RingWrapsAfterMaxSamples) {
  Metric metric("m", MetricRepr::kNumber, 1024);
  double sum = 0;
  for (int i = 0; i < 1500; ++i) {
    metric.AddSample(i, i);
    sum += i;
  }
  MetricSnapshot snapshot = metric.Snapshot();
  EXPECT_EQ(snapshot.total_samples, 1500);
  EXPECT_DOUBLE_EQ(snapshot.accumulator, sum);
  ASSERT_EQ(snapshot.samples.size(), 1024u);
  for (size_t i = 0; i < snapshot.samples.size(); ++i) {
    ASSERT_EQ(snapshot.samples[i].value, 476.0 + static_cast<double>(i));  // oldest first
    ASSERT_EQ(snapshot.samples[i].timestamp_ns, 476 + static_cast<int64_t>(i));
  }
}

TEST(MetricTest, ExactlyFullRing) {
  Metric metric("m", MetricRepr::kNumber, 4);
  for (int i = 0; i < 4; ++i) metric.AddSample(i, i);
  MetricSnapshot snapshot = metric.Snapshot();
  ASSERT_EQ(snapshot.samples.size(), 4u);
  EXPECT_EQ(snapshot.samples.front().value, 0.0);
  EXPECT_EQ(snapshot.samples.back().value, 3.0);
}

TEST(MetricTest, ClearForgetsEverything) {
  Metric metric("m", MetricRepr::kNumber, 8);
  metric.AddSample(3.0);
  metric.Clear();
  EXPECT_EQ(metric.TotalSamples(), 0);
  EXPECT_EQ(metric.Accumulator(), 0.0);
  EXPECT_TRUE(metric.Snapshot().samples.empty());
}

TEST(MetricsRegistryTest, TextReportLayout) {
  MetricsRegistry registry;
  Metric* compile = registry.GetMetric(kCompileTime, MetricRepr::kTime);
  compile->AddSample(1'000'000'000, 1e9);
  compile->AddSample(2'000'000'000, 2e9);
  registry.GetMetric(kInboundData, MetricRepr::kBytes)->AddSample(5, 1.5 * 1024 * 1024);
  registry.GetMetric("Unused", MetricRepr::kNumber);  // no samples: not reported
  registry.GetCounter(kCachedCompile)->Add(3);
  registry.GetCounter(kUncachedCompile);  // zero: not reported
  registry.GetCounter(kReshardData)->Add();

  const std::string one = "01s000ms000.000us";
  const std::string two = "02s000ms000.000us";
  const std::string expected =
      "Metric: CompileTime\n"
      "  TotalSamples: 2\n"
      "  Accumulator: 03s000ms000.000us\n"
      "  ValueRate: 03s000ms000.000us / second\n"
      "  Rate: 2 / second\n"
      "  Percentiles: 1%=" + one + "; 5%=" + one + "; 10%=" + one + "; 20%=" + one +
      "; 50%=" + two + "; 80%=" + two + "; 90%=" + two + "; 95%=" + two + "; 99%=" + two +
      "\n"
      "Metric: InboundData\n"
      "  TotalSamples: 1\n"
      "  Accumulator: 1.50MB\n"
      "  Percentiles: 1%=1.50MB; 5%=1.50MB; 10%=1.50MB; 20%=1.50MB; 50%=1.50MB; 80%=1.50MB; "
      "90%=1.50MB; 95%=1.50MB; 99%=1.50MB\n"
      "Counter: CachedCompile\n"
      "  Value: 3\n"
      "Counter: ReshardData\n"
      "  Value: 1\n";
  EXPECT_EQ(registry.TextReport(), expected);
  EXPECT_THAT(registry.MetricNames(), ElementsAre("CompileTime", "InboundData"));
  EXPECT_THAT(registry.CounterNames(), ElementsAre("CachedCompile", "ReshardData"));
}

TEST(MetricsRegistryTest, EmptyRegistryReports) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.TextReport(), "");
  EXPECT_EQ(registry.JsonReport(), R"({"metrics": {}, "counters": {}})");
}

TEST(MetricsRegistryTest, JsonReportStructure) {
  MetricsRegistry registry;
  Metric* compile = registry.GetMetric(kCompileTime, MetricRepr::kTime);
  compile->AddSample(1'000'000'000, 1e9);
  compile->AddSample(2'000'000'000, 2e9);
  registry.GetMetric(kOutboundData, MetricRepr::kBytes)->AddSample(7, 4096);
  registry.GetCounter(kCachedCompile)->Add(3);
  registry.GetCounter(kReplicateShardedData)->Add(2);

  const std::string json = registry.JsonReport();
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_THAT(json, HasSubstr(R"("metrics": {"CompileTime": {"repr": "time", )"));
  EXPECT_THAT(json, HasSubstr(R"("total_samples": 2, "accumulator": 3000000000, )"));
  EXPECT_THAT(json, HasSubstr(R"("value_rate": 3000000000, "rate": 2, )"));
  EXPECT_THAT(json, HasSubstr(R"("percentiles": {"1": 1000000000, "5": 1000000000, )"));
  EXPECT_THAT(json, HasSubstr(R"("99": 2000000000}})"));
  EXPECT_THAT(json, HasSubstr(R"("OutboundData": {"repr": "bytes", "total_samples": 1, )"));
  EXPECT_THAT(json, HasSubstr(R"("value_rate": null, "rate": null, )"));
  EXPECT_THAT(json, HasSubstr(R"("counters": {"CachedCompile": 3, "ReplicateShardedData": 2}})"));
}

TEST(MetricsRegistryTest, SamePointerForSameName) {
  MetricsRegistry registry;
  Metric* a = registry.GetMetric("x", MetricRepr::kTime);
  EXPECT_EQ(registry.GetMetric("x", MetricRepr::kBytes), a);
  EXPECT_EQ(a->repr(), MetricRepr::kTime);  // the first repr stays
  Counter* c = registry.GetCounter("c");
  EXPECT_EQ(registry.GetCounter("c"), c);
}

TEST(MetricsRegistryTest, CounterValueAndMetricData) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.CounterValue("absent"), 0);
  EXPECT_FALSE(registry.MetricData("absent").has_value());
  registry.GetCounter("c")->Add(5);
  registry.GetCounter("c")->Add(-2);
  EXPECT_EQ(registry.CounterValue("c"), 3);
  registry.GetMetric("m", MetricRepr::kNumber)->AddSample(2.5);
  std::optional<MetricSnapshot> data = registry.MetricData("m");
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->total_samples, 1);
  EXPECT_EQ(data->accumulator, 2.5);
}

TEST(MetricsRegistryTest, ResetKeepsPointersValid) {
  MetricsRegistry registry;
  Metric* metric = registry.GetMetric("m", MetricRepr::kNumber);
  Counter* counter = registry.GetCounter("c");
  metric->AddSample(1.0);
  counter->Add();
  registry.Reset();
  EXPECT_EQ(metric->TotalSamples(), 0);
  EXPECT_EQ(counter->Value(), 0);
  EXPECT_EQ(registry.TextReport(), "");
  metric->AddSample(2.0);
  EXPECT_EQ(registry.MetricNames(), std::vector<std::string>{"m"});
}

TEST(MetricsRegistryTest, OptionsControlRingAndPercentiles) {
  MetricsRegistry registry(MetricsOptions{.max_samples = 2, .percentiles = {0.5, 1.5, 0.0}});
  Metric* metric = registry.GetMetric("m", MetricRepr::kNumber);
  for (int i = 1; i <= 5; ++i) metric->AddSample(i, i);
  EXPECT_EQ(metric->Snapshot().samples.size(), 2u);
  EXPECT_THAT(registry.TextReport(), HasSubstr("  Percentiles: 50%=5.00\n"));
}

TEST(ScopedTimerTest, AddsElapsedNanoseconds) {
  MetricsRegistry registry;
  Metric* metric = registry.GetMetric(kExecuteTime, MetricRepr::kTime);
  {
    ScopedTimer timer(metric);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  MetricSnapshot snapshot = metric->Snapshot();
  ASSERT_EQ(snapshot.total_samples, 1);
  EXPECT_GE(snapshot.samples[0].value, 2e6);
  EXPECT_LT(snapshot.samples[0].value, 10e9);
  { ScopedTimer null_timer(nullptr); }  // no-op
}

TEST(MetricsRegistryTest, ConcurrentSamplesAndCounters) {
  MetricsRegistry registry;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      // Every thread looks the objects up itself, racing on creation.
      Metric* metric = registry.GetMetric("m", MetricRepr::kNumber);
      Counter* counter = registry.GetCounter("c");
      for (int i = 0; i < kPerThread; ++i) {
        metric->AddSample(static_cast<double>(t));
        counter->Add();
        if (i % 5000 == 0) (void)registry.TextReport();  // readers alongside writers
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Metric* metric = registry.GetMetric("m", MetricRepr::kNumber);
  EXPECT_EQ(metric->TotalSamples(), kThreads * kPerThread);
  EXPECT_DOUBLE_EQ(metric->Accumulator(), kPerThread * (kThreads * (kThreads - 1) / 2.0));
  EXPECT_EQ(metric->Snapshot().samples.size(), 1024u);
  EXPECT_EQ(registry.CounterValue("c"), kThreads * kPerThread);
}

TEST(GlobalMetricsTest, IsOneObject) {
  // The registry another thread reaches is this thread's.
  const MetricsRegistry* here = &GlobalMetrics();
  const MetricsRegistry* there = nullptr;
  std::thread([&] { there = &GlobalMetrics(); }).join();
  EXPECT_EQ(there, here);
  Counter* counter = GlobalMetrics().GetCounter(kExecutableIntrospection);
  const int64_t before = counter->Value();
  counter->Add();
  EXPECT_EQ(GlobalMetrics().CounterValue(kExecutableIntrospection), before + 1);
}

}  // namespace
}  // namespace shardrt
