// The quantized matrix kernels against the machine's bandwidth limit: weight bytes read per
// second by y = x . W^T (models/llama/quant_matmul.h, rows of x = 1 unless --x-rows) against a
// plain memcpy of the same bytes on the same threads, in rounds that alternate the two (the
// order flips every round), so that each round gives one paired ratio.
//
//   qmatmul_bench [--types Q4_1,Q8_0,...] [--threads 1,2] [--x-rows 1] [--rounds 15]
//                 [--isa best|generic|avx2|avx512] [--rows 4096] [--cols 4096] [--per-row]
//                 [--pass-mb 256] [--json]
//
// The matrices are 4096 x 4096 and repeated until one pass reads at least 256 MB (8x the L3 of
// the machines this runs on), so every pass streams from memory (--pass-mb 0 and a small
// matrix: one copy that stays in cache, the kernel's compute limit). Prints one line per type and
// thread count: kernel GB/s, memcpy GB/s (bytes copied), and the kernel / memcpy ratio with its
// median and a 95% interval of the median over the rounds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "llama/quant_matmul.h"
#include "llama/quants.h"

namespace {

using namespace shardrt::llama;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> types = {"Q4_1", "Q8_0", "Q4_0", "Q5_0", "Q5_1", "Q4_K", "Q6_K",
                                    "F16", "BF16", "F32"};
  std::vector<int> threads = {1, 2};
  int64_t x_rows = 1;
  int rounds = 15;
  std::string isa = "best";
  bool per_row = false;  // MatmulOrder::kPerRow (what decode steps use)
  bool json = false;
  int64_t rows = 4096, cols = 4096;
  int64_t pass_mb = 256;
};

GgufType TypeNamed(const std::string& name) {
  for (uint32_t t = 0; t < 40; ++t) {
    if (GgufTypeName(t) == name && LayoutOf(static_cast<GgufType>(t)).block_elements != 0) {
      return static_cast<GgufType>(t);
    }
  }
  std::fprintf(stderr, "qmatmul_bench: unknown type %s\n", name.c_str());
  std::exit(2);
}

// Runs fn(thread, threads) on `threads` threads (the caller is thread 0) and returns seconds.
template <typename Fn>
double Timed(int threads, const Fn& fn) {
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(fn, t, threads);
  fn(0, threads);
  for (std::thread& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median and a distribution-free 95% interval of the median (order statistics).
struct Summary {
  double median, low, high;
};
Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const double n = double(v.size());
  const double half = 0.98 * std::sqrt(n);
  const auto at = [&](double i) {
    return v[size_t(std::clamp(i, 0.0, n - 1))];
  };
  return {at((n - 1) / 2), at(std::floor((n - 1) / 2 - half)), at(std::ceil((n - 1) / 2 + half))};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--types") {
      o.types = absl::StrSplit(v, ','), ++i;
    } else if (a == "--threads") {
      o.threads.clear();
      for (absl::string_view t : absl::StrSplit(v, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(t, &n) || n < 1) return std::fprintf(stderr, "bad --threads\n"), 2;
        o.threads.push_back(n);
      }
      ++i;
    } else if (a == "--x-rows" && absl::SimpleAtoi(v, &o.x_rows) && o.x_rows >= 1) {
      ++i;
    } else if (a == "--rounds" && absl::SimpleAtoi(v, &o.rounds) && o.rounds >= 3) {
      ++i;
    } else if (a == "--rows" && absl::SimpleAtoi(v, &o.rows) && o.rows >= 16) {
      ++i;
    } else if (a == "--cols" && absl::SimpleAtoi(v, &o.cols) && o.cols >= 32 &&
               o.cols % 32 == 0) {
      ++i;
    } else if (a == "--pass-mb" && absl::SimpleAtoi(v, &o.pass_mb) && o.pass_mb >= 0) {
      ++i;
    } else if (a == "--isa") {
      o.isa = v, ++i;
    } else if (a == "--per-row") {
      o.per_row = true;
    } else if (a == "--json") {
      o.json = true;
    } else {
      std::fprintf(stderr,
                   "usage: qmatmul_bench [--types T,...] [--threads 1,2] [--x-rows N] "
                   "[--rounds N] [--isa best|generic|avx2|avx512] [--rows N] [--cols K] "
                   "[--pass-mb M] [--per-row] [--json]\n");
      return 2;
    }
  }
  KernelIsa isa = BestIsa();
  if (o.isa != "best") {
    bool found = false;
    for (KernelIsa c : SupportedIsas()) {
      if (IsaName(c) == o.isa) isa = c, found = true;
    }
    if (!found) return std::fprintf(stderr, "this CPU has no path %s\n", o.isa.c_str()), 2;
  }
  const int64_t kN = o.rows, kK = o.cols;
  const int64_t kPassBytes = o.pass_mb << 20;
  std::mt19937 rng(24);
  std::vector<float> x(size_t(o.x_rows * kK));
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  if (!o.json) {
    std::printf("%-5s %7s %8s %11s %8s %11s  %s\n", "type", "threads", "path", "kernel GB/s",
                "GFLOP/s", "memcpy GB/s", "kernel/memcpy median [95% interval]");
  }
  for (const std::string& name : o.types) {
    const GgufType type = TypeNamed(name);
    const BlockLayout layout = LayoutOf(type);
    if (kK % layout.block_elements != 0) {
      std::fprintf(stderr, "qmatmul_bench: %s skipped: --cols %lld is not whole blocks\n",
                   name.c_str(), static_cast<long long>(kK));
      continue;
    }
    const int64_t row_bytes = kK / layout.block_elements * layout.block_bytes;
    const int64_t bytes = kN * row_bytes;
    const int64_t copies = std::max<int64_t>(1, (kPassBytes + bytes - 1) / bytes);
    // Passes per measurement: at least 64 MB read, so that a cache-resident matrix is timed
    // over many passes.
    const int64_t passes = std::max<int64_t>(1, (int64_t(64) << 20) / (bytes * copies));
    // Random bytes in which every 16-bit word is a normal f16 (exponent 8 to 15), wherever
    // a block keeps its scales: the kernels' speed does not depend on the values.
    std::vector<std::byte> src(size_t(bytes * copies)), dst(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = std::byte(i % 2 == 0 ? rng() & 0xff : 0x20 | (rng() & 0x9f));
    }
    std::vector<float> y(size_t(o.x_rows * kN * copies));
    for (int threads : o.threads) {
      auto kernel = [&](int t, int n) {
        std::vector<float> scratch(static_cast<size_t>(
            MatmulScratchFloats(QuantMatrix{type, nullptr, kN, kK, row_bytes})));
        const int64_t begin = kN * t / n, end = kN * (t + 1) / n;
        for (int64_t p = 0; p < passes; ++p) {
          for (int64_t c = 0; c < copies; ++c) {
            const QuantMatrix w{type, src.data() + c * bytes, kN, kK, row_bytes};
            QuantMatmulRows(isa, w, x.data(), o.x_rows, y.data() + c * o.x_rows * kN, kN,
                            begin, end, scratch.data(),
                            o.per_row ? MatmulOrder::kPerRow : MatmulOrder::kFastest);
          }
        }
      };
      auto copy = [&](int t, int n) {
        const size_t total = src.size(), begin = total * t / n, end = total * (t + 1) / n;
        for (int64_t p = 0; p < passes; ++p) {
          std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
        }
      };
      Timed(threads, kernel);  // warm: pages touched, frequencies up
      Timed(threads, copy);
      std::vector<double> ratios, kernel_rates, copy_rates, flop_rates;
      for (int r = 0; r < o.rounds; ++r) {
        double tk, tc;
        if (r % 2 == 0) {
          tk = Timed(threads, kernel), tc = Timed(threads, copy);
        } else {
          tc = Timed(threads, copy), tk = Timed(threads, kernel);
        }
        kernel_rates.push_back(double(src.size()) * double(passes) / tk / 1e9);
        flop_rates.push_back(2.0 * double(o.x_rows) * double(kN * kK * copies) *
                             double(passes) / tk / 1e9);
        copy_rates.push_back(double(src.size()) * double(passes) / tc / 1e9);
        ratios.push_back(tc / tk);
      }
      const Summary ratio = Summarize(ratios);
      const double kr = Summarize(kernel_rates).median, cr = Summarize(copy_rates).median;
      const double gflops = Summarize(flop_rates).median;
      if (o.json) {
        std::printf("{\"type\": \"%s\", \"threads\": %d, \"isa\": \"%s\", \"x_rows\": %lld, "
                    "\"kernel_gbps\": %.3f, \"kernel_gflops\": %.2f, \"memcpy_gbps\": %.3f, "
                    "\"ratio\": %.4f, \"ratio_low\": %.4f, \"ratio_high\": %.4f}\n",
                    name.c_str(), threads, std::string(IsaName(isa)).c_str(),
                    static_cast<long long>(o.x_rows), kr, gflops, cr, ratio.median, ratio.low,
                    ratio.high);
      } else {
        std::printf("%-5s %7d %8s %11.2f %8.1f %11.2f  %.2f [%.2f, %.2f]\n", name.c_str(),
                    threads, std::string(IsaName(isa)).c_str(), kr, gflops, cr, ratio.median,
                    ratio.low, ratio.high);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
