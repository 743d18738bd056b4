// cmd_version.cpp: `bertrain info`: version, threads, the oneDNN build in use and whether --bf16 is native.
#include <oneapi/dnnl/dnnl.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "bertrain/core/threads.h"
#include "bertrain/core/version.h"
#include "bertrain/ops/ops.h"
#include "commands.h"

namespace bertrain::cli {
namespace {
Registrar reg{{"info", "print the version, thread count and oneDNN version", [](CLI::App&) {
                 return std::function<int()>([] {
                   const dnnl_version_t* v = dnnl_version();
                   std::cout << "bertrain " << BERTRAIN_VERSION << "\nthreads " << num_threads() << "\noneDNN "
                             << v->major << "." << v->minor << "." << v->patch << " (cpu runtime "
                             << (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") << ")\nbf16 matmuls (--bf16) "
                             << (matmul_bf16_native()      ? "native (AVX512_BF16)"
                                 : matmul_bf16_supported() ? "emulated by oneDNN (slower than f32)"
                                                           : "unavailable (needs AVX-512)")
                             << "\n";
                   return 0;
                 });
               }}};
}  // namespace
}  // namespace bertrain::cli
