#include "shardrt/base/trace.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../common/mini_json.h"
#include "shardrt/base/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt {
namespace {

using ::shardrt::testing::JsonParser;
using ::shardrt::testing::JsonValue;
using ::testing::HasSubstr;

JsonValue ParseOrDie(const std::string& text) {
  JsonValue v;
  std::string error;
  EXPECT_TRUE(JsonParser::Parse(text, &v, &error)) << error << "\n" << text;
  return v;
}

// The "traceEvents" with phase `ph`.
std::vector<JsonValue> EventsWithPhase(const JsonValue& trace, const std::string& ph) {
  std::vector<JsonValue> out;
  for (const JsonValue& e : trace["traceEvents"].array) {
    if (e["ph"].string == ph) out.push_back(e);
  }
  return out;
}

TEST(TraceTest, SpansRecordNothingWhenNoRecorderIsCurrent) {
  ASSERT_FALSE(TracingEnabled());
  EXPECT_EQ(CurrentTraceRecorder(), nullptr);
  TraceRecorder recorder;
  {
    TraceSpan span("off", "test");
    EXPECT_FALSE(span.active());
    span.AddArg("k", "v");  // no-op
  }
  EXPECT_EQ(recorder.num_events(), 0);
  EXPECT_FALSE(recorder.recording());
}

TEST(TraceTest, StartStopRecordsSpansOfTheCurrentRecorder) {
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.Start().ok());
  EXPECT_TRUE(recorder.recording());
  EXPECT_TRUE(TracingEnabled());
  EXPECT_EQ(CurrentTraceRecorder(), &recorder);
  EXPECT_TRUE(recorder.Start().ok());  // again: no-op
  const int64_t before = MetricsNowNs();
  {
    SHARDRT_TRACE_SPAN("outer", "test");
    TraceSpan inner("inner", "test");
    EXPECT_TRUE(inner.active());
    inner.AddArg("what", "sleep");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int64_t after = MetricsNowNs();
  recorder.Stop();
  EXPECT_FALSE(TracingEnabled());
  EXPECT_EQ(CurrentTraceRecorder(), nullptr);
  { SHARDRT_TRACE_SPAN("after stop", "test"); }

  std::vector<TraceEvent> events = recorder.Events();
  ASSERT_EQ(events.size(), 2u);
  // Inner closes first.
  EXPECT_EQ(events[0].name, "inner");
  EXPECT_EQ(events[1].name, "outer");
  for (const TraceEvent& e : events) {
    EXPECT_EQ(e.phase, TraceEvent::Phase::kComplete);
    EXPECT_EQ(e.category, "test");
    EXPECT_EQ(e.tid, TraceThreadId());
    EXPECT_GE(e.start_ns, before);
    EXPECT_LE(e.start_ns + e.duration_ns, after);
    EXPECT_GE(e.duration_ns, 2'000'000);
  }
  EXPECT_LE(events[1].start_ns, events[0].start_ns);
  EXPECT_GE(events[1].start_ns + events[1].duration_ns, events[0].start_ns + events[0].duration_ns);
  ASSERT_EQ(events[0].args.size(), 1u);
  EXPECT_EQ(events[0].args[0].first, "what");
  EXPECT_EQ(events[0].args[0].second, "sleep");
  EXPECT_TRUE(events[1].args.empty());
}

TEST(TraceTest, FreeFunctionsRecordIntoTheCurrentRecorderOnly) {
  TraceRecorder recorder;
  TraceAsyncSpan("off", "test", 1, 0, 10);
  TraceCounter("off", "test", 0, 1);
  ASSERT_TRUE(recorder.Start().ok());
  TraceAsyncSpan("wait", "test", 7, 100, 300, {{"k", "v"}});
  TraceCounter("depth", "test", 200, 2.5);
  recorder.Stop();
  std::vector<TraceEvent> events = recorder.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].phase, TraceEvent::Phase::kAsyncBegin);
  EXPECT_EQ(events[0].start_ns, 100);
  EXPECT_EQ(events[0].id, 7u);
  EXPECT_EQ(events[0].args.size(), 1u);
  EXPECT_EQ(events[1].phase, TraceEvent::Phase::kAsyncEnd);
  EXPECT_EQ(events[1].start_ns, 300);
  EXPECT_EQ(events[1].id, 7u);
  EXPECT_EQ(events[2].phase, TraceEvent::Phase::kCounter);
  EXPECT_EQ(events[2].value, 2.5);
}

TEST(TraceTest, OnlyOneRecorderIsCurrentAtATime) {
  TraceRecorder a, b;
  ASSERT_TRUE(a.Start().ok());
  absl::Status s = b.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  b.Stop();  // not current: no-op
  EXPECT_TRUE(a.recording());
  a.Stop();
  ASSERT_TRUE(b.Start().ok());
  { SHARDRT_TRACE_SPAN("b", "test"); }
  b.Stop();
  EXPECT_EQ(a.num_events(), 0);
  EXPECT_EQ(b.num_events(), 1);
}

TEST(TraceTest, DestroyingTheCurrentRecorderStopsTracing) {
  {
    TraceRecorder recorder;
    ASSERT_TRUE(recorder.Start().ok());
  }
  EXPECT_FALSE(TracingEnabled());
  TraceRecorder next;
  EXPECT_TRUE(next.Start().ok());
  next.Stop();
}

TEST(TraceTest, SpanOpenWhileItsRecorderIsDestroyedIsSafe) {
  auto recorder = std::make_unique<TraceRecorder>();
  ASSERT_TRUE(recorder->Start().ok());
  auto span = std::make_unique<TraceSpan>("late", "test");
  EXPECT_TRUE(span->active());
  recorder.reset();  // stops and destroys the recorder
  span.reset();      // records into storage nobody reads: must not crash (ASan checks)
  EXPECT_FALSE(TracingEnabled());
}

TEST(TraceTest, JsonIsValidChromeTraceWithThreadNames) {
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.Start().ok());
  SetTraceThreadName("test main");
  const int main_tid = TraceThreadId();
  int worker_tid = 0;
  std::thread worker([&] {
    SetTraceThreadName("worker \"one\"");
    EXPECT_TRUE(TraceThreadNamed());
    worker_tid = TraceThreadId();
    SHARDRT_TRACE_SPAN("work", "test");
  });
  worker.join();
  int unnamed_tid = 0;
  std::thread unnamed([&] {
    EXPECT_FALSE(TraceThreadNamed());
    unnamed_tid = TraceThreadId();
    SHARDRT_TRACE_SPAN("anonymous", "test");
  });
  unnamed.join();
  {
    TraceSpan span("tricky \"name\"\n\t\\ \x01", "");
    span.AddArg("path", "a\\b \"c\"");
  }
  const int64_t now = MetricsNowNs();
  recorder.AddAsyncSpan("queued", "test", 42, now, now + 5000, {{"step", "7"}});
  recorder.AddCounter("in flight", "test", now, 3);
  recorder.AddSpan("explicit", "test", now, now + 1500);
  recorder.Stop();

  JsonValue trace = ParseOrDie(recorder.ToJson());
  ASSERT_EQ(trace.kind, JsonValue::Kind::kObject);
  ASSERT_EQ(trace["traceEvents"].kind, JsonValue::Kind::kArray);
  EXPECT_EQ(trace["displayTimeUnit"].string, "ms");
  EXPECT_EQ(trace["otherData"]["dropped_events"].number, 0);

  // Every event has the keys viewers need.
  for (const JsonValue& e : trace["traceEvents"].array) {
    EXPECT_TRUE(e.Has("name") && e.Has("ph") && e.Has("pid") && e.Has("tid"));
    EXPECT_EQ(e["pid"].number, static_cast<double>(getpid()));
    if (e["ph"].string != "M") {
      EXPECT_EQ(e["ts"].kind, JsonValue::Kind::kNumber);
      EXPECT_EQ(e["cat"].kind, JsonValue::Kind::kString);
    }
  }
  std::map<int, std::string> thread_names;
  for (const JsonValue& m : EventsWithPhase(trace, "M")) {
    if (m["name"].string == "thread_name") {
      thread_names[static_cast<int>(m["tid"].number)] = m["args"]["name"].string;
    }
  }
  EXPECT_EQ(thread_names[main_tid], "test main");
  EXPECT_EQ(thread_names[worker_tid], "worker \"one\"");
  EXPECT_EQ(thread_names[unnamed_tid], "thread " + std::to_string(unnamed_tid));

  std::map<std::string, JsonValue> spans;
  for (const JsonValue& x : EventsWithPhase(trace, "X")) spans[x["name"].string] = x;
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans["work"]["tid"].number, worker_tid);
  EXPECT_EQ(spans["anonymous"]["tid"].number, unnamed_tid);
  const JsonValue& tricky = spans["tricky \"name\"\n\t\\ \x01"];
  EXPECT_EQ(tricky["cat"].string, "shardrt");  // empty category: the default
  EXPECT_EQ(tricky["args"]["path"].string, "a\\b \"c\"");
  EXPECT_EQ(tricky["tid"].number, main_tid);
  EXPECT_NEAR(spans["explicit"]["dur"].number, 1.5, 1e-9);  // microseconds

  std::vector<JsonValue> begins = EventsWithPhase(trace, "b");
  std::vector<JsonValue> ends = EventsWithPhase(trace, "e");
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(begins[0]["name"].string, "queued");
  EXPECT_EQ(begins[0]["id"].string, ends[0]["id"].string);
  EXPECT_EQ(begins[0]["args"]["step"].string, "7");
  EXPECT_NEAR(ends[0]["ts"].number - begins[0]["ts"].number, 5.0, 1e-6);

  std::vector<JsonValue> counters = EventsWithPhase(trace, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]["name"].string, "in flight");
  EXPECT_EQ(counters[0]["args"]["value"].number, 3);
}

TEST(TraceTest, MaxEventsDropsAndCounts) {
  TraceRecorder recorder(TraceOptions{.max_events = 3});
  ASSERT_TRUE(recorder.Start().ok());
  for (int i = 0; i < 5; ++i) SHARDRT_TRACE_SPAN("s", "test");
  recorder.AddAsyncSpan("a", "test", 1, 0, 1);  // both halves or neither
  recorder.Stop();
  EXPECT_EQ(recorder.num_events(), 3);
  EXPECT_EQ(recorder.dropped_events(), 4);
  JsonValue trace = ParseOrDie(recorder.ToJson());
  EXPECT_EQ(trace["otherData"]["dropped_events"].number, 4);
  recorder.Clear();
  EXPECT_EQ(recorder.num_events(), 0);
  EXPECT_EQ(recorder.dropped_events(), 0);
}

TEST(TraceTest, WriteJsonWritesTheFileAndReportsBadPaths) {
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.Start().ok());
  { SHARDRT_TRACE_SPAN("written", "test"); }
  recorder.Stop();
  const std::string path =
      ::testing::TempDir() + "/trace_test_" + std::to_string(getpid()) + ".json";
  ASSERT_TRUE(recorder.WriteJson(path).ok());
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(contents.str(), recorder.ToJson());
  ParseOrDie(contents.str());
  std::remove(path.c_str());

  absl::Status bad = recorder.WriteJson("/nonexistent-dir/trace.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("/nonexistent-dir/trace.json"));
}

TEST(TraceTest, ConcurrentSpansWhileStartingAndStopping) {
  TraceRecorder recorder(TraceOptions{.max_events = 20000});
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!done.load()) {
        SHARDRT_TRACE_SPAN("spin", "test");
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(recorder.Start().ok());
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    recorder.Stop();
  }
  done = true;
  for (std::thread& t : threads) t.join();
  const int64_t recorded = recorder.num_events();
  for (const TraceEvent& e : recorder.Events()) EXPECT_EQ(e.name, "spin");
  JsonValue trace = ParseOrDie(recorder.ToJson());
  EXPECT_EQ(static_cast<int64_t>(EventsWithPhase(trace, "X").size()), recorded);
}

}  // namespace
}  // namespace shardrt
