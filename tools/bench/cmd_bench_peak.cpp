// cmd_bench_peak.cpp: `bertrain bench peak`: prints the cores' fp32 FMA and bf16 dot-product peaks
// (bertrain/core/cpu_peak.h; the denominators of MFU in `bench train` and `bench finetune`).
#include <cstdio>
#include <fstream>

#include "bench_util.h"
#include "bertrain/core/error.h"
#include "bertrain/core/cpu_peak.h"
#include "nlohmann/json.hpp"

namespace bertrain::cli {
namespace {

int run_peak(double seconds, const std::string& json_out) {
  FmaPeak p = measure_fma_peak(seconds);
  std::printf("bertrain bench peak: fp32 FMA throughput loop, %d threads (16 independent chains per thread)\n",
              p.threads);
  std::printf("  AVX-512: %10.1f GFLOP/s%s\n", p.avx512, p.avx512 > 0 ? "" : " (not supported)");
  std::printf("  AVX2:    %10.1f GFLOP/s%s\n", p.avx2, p.avx2 > 0 ? "" : " (not supported)");
  std::printf("peak_gflops %.1f (%s)\n", p.gflops, p.isa.c_str());
  const double bf = measure_bf16_dot_peak(seconds);
  if (bf > 0) std::printf("bf16_peak_gflops %.1f (AVX512_BF16 VDPBF16PS loop; the MFU denominator of bench train --bf16)\n", bf);
  else std::printf("bf16_peak_gflops: not measured (this CPU has no AVX512_BF16)\n");
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::app);
    BERTRAIN_CHECK(f.good(), "bench peak: cannot open --json_out '", json_out, "'");
    nlohmann::json j{{"bench", "peak"}, {"peak_gflops", p.gflops}, {"isa", p.isa},
                     {"avx512_gflops", p.avx512}, {"avx2_gflops", p.avx2}, {"threads", p.threads},
                     {"bf16_peak_gflops", bf}};
    f << j.dump() << "\n";
  }
  return 0;
}

BenchRegistrar reg{{"peak", "fp32 FMA peak of all cores, measured (the MFU denominator of `bench train`)",
                    [](CLI::App& sub) {
                      auto seconds = std::make_shared<double>(0.25);
                      auto json_out = std::make_shared<std::string>();
                      sub.add_option("--seconds", *seconds, "length of one timed run per instruction set (default 0.25)");
                      sub.add_option("--json_out", *json_out, "append the result as one JSON line to this file");
                      return std::function<int()>([=] { return run_peak(*seconds, *json_out); });
                    }}};

}  // namespace

}  // namespace bertrain::cli
