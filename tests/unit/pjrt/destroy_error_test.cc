// A PJRT handle whose destruction fails is counted and reported once, never dropped silently.
#include "gtest/gtest.h"
#include "pjrt/call.h"
#include "shardrt/base/metrics.h"

namespace shardrt::pjrt::internal {
namespace {

TEST(DestroyErrorTest, CountedInTheMetricAndWrittenToStderrOnce) {
  Counter* errors = GlobalMetrics().GetCounter(kPjrtDestroyError);
  const int64_t before = errors->Value();
  ::testing::internal::CaptureStderr();
  ReportDestroyError(absl::OkStatus());
  ReportDestroyError(absl::InternalError("PJRT_Buffer_Destroy: the buffer is gone"));
  ReportDestroyError(absl::InternalError("PJRT_Event_Destroy: again"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(errors->Value(), before + 2);
  if (before == 0) {
    EXPECT_NE(err.find("PJRT_Buffer_Destroy: the buffer is gone"), std::string::npos) << err;
    EXPECT_NE(err.find("PjrtDestroyError"), std::string::npos) << err;
  }
  EXPECT_EQ(err.find("again"), std::string::npos) << err;
  EXPECT_NE(GlobalMetrics().TextReport().find("PjrtDestroyError"), std::string::npos);
}

}  // namespace
}  // namespace shardrt::pjrt::internal
