// Uses an installed shardrt: uploads a 16x3 array sharded by rows over 8 CPU devices, runs an
// 8-device SPMD program (y = 2x + 1, and the column sums of x, which need an all-reduce),
// checks both results against the host and prints them. Exits 1 on any error or mismatch.
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardrt/shardrt.h"

namespace {

constexpr char kProgram[] = R"(
module @consumer attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x3xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<16x3xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<3xf32> {mhlo.sharding = "{replicated}"}) {
    %two = stablehlo.constant dense<2.0> : tensor<16x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<16x3xf32>
    %x2 = stablehlo.multiply %x, %two : tensor<16x3xf32>
    %y = stablehlo.add %x2, %one : tensor<16x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %y, %s : tensor<16x3xf32>, tensor<3xf32>
  }
})";

absl::Status Run() {
  // The front door: the CPU plugin installed with shardrt, 8 devices.
  shardrt::RuntimeOptions options;
  options.devices = 8;
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<shardrt::Runtime> runtime,
                           shardrt::Runtime::Create(options));
  SHARDRT_ASSIGN_OR_RETURN(shardrt::ComputationPtr program, runtime->Compile(kProgram, "consumer"));

  // x[i][j] = i - 2j, uploaded as one sharded array with the program's parameter layout.
  std::vector<float> x(16 * 3);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 3; ++j) x[i * 3 + j] = static_cast<float>(i - 2 * j);
  }
  SHARDRT_ASSIGN_OR_RETURN(
      shardrt::DataPtr arg,
      runtime->Put(shardrt::HostArrayView::Of<float>(x, {16, 3}), program->parameter_layout(0)));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<shardrt::DataPtr> outputs, runtime->Execute(*program, {arg}));
  SHARDRT_ASSIGN_OR_RETURN(shardrt::HostArray host_y, runtime->ToHost(outputs[0]));
  SHARDRT_ASSIGN_OR_RETURN(shardrt::HostArray host_s, runtime->ToHost(outputs[1]));
  SHARDRT_ASSIGN_OR_RETURN(std::span<const float> y, host_y.values<float>());
  SHARDRT_ASSIGN_OR_RETURN(std::span<const float> s, host_s.values<float>());

  for (int i = 0; i < 16 * 3; ++i) {
    if (y[i] != 2 * x[i] + 1) {
      return absl::InternalError(absl::StrCat("y[", i, "] = ", y[i], ", expected ", 2 * x[i] + 1));
    }
  }
  for (int j = 0; j < 3; ++j) {
    float expected = 0;
    for (int i = 0; i < 16; ++i) expected += x[i * 3 + j];
    if (std::fabs(s[j] - expected) > 1e-4f) {
      return absl::InternalError(absl::StrCat("s[", j, "] = ", s[j], ", expected ", expected));
    }
  }
  std::printf("consumer: %s on %zu '%s' devices, output y %s sharded %s\n", program->name().c_str(),
              runtime->devices().size(), runtime->platform_name().c_str(),
              shardrt::ShapeToString(outputs[0]->shape()).c_str(),
              outputs[0]->sharding().ToString().c_str());
  std::printf("consumer: y[15] = [%g, %g, %g], column sums = [%g, %g, %g]: correct\n",
              y[45], y[46], y[47], s[0], s[1], s[2]);
  return absl::OkStatus();
}

}  // namespace

int main() {
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
