#!/usr/bin/python3
# profile_summary.py PERF_DATA: groups a `perf record` profile of `bertrain bench train` by where the time goes
# (oneDNN GEMM kernels, oneDNN packing copies, libgomp, our kernels by op, allocator/page faults, ...), first over
# all samples, then over the training steps alone (set-up samples: model initialisation and the FMA peak loop
# removed). Symbol patterns are matched in order; the first hit wins.
import re
import subprocess
import sys

CATEGORIES = [
    ("set-up: FMA peak loop", r"fma_chains"),
    ("set-up: model init (truncated normal)", r"Rng::normal|__cos_fma|__sin_fma|__ieee754_log|truncated_normal|Rng::uniform"),
    ("oneDNN GEMM kernels (JIT brgemm/gemm)", r"^\[JIT\].*(brgemm_kernel|gemm_kernel|jit_avx.*gemm|kernel_t)"),
    ("oneDNN packing copies (JIT copy_a/copy_b)", r"^\[JIT\].*copy"),
    ("oneDNN other JIT code", r"^\[JIT\]"),
    ("oneDNN library (non-JIT)", r"libdnnl"),
    ("libgomp (barriers, spin-waiting, fork/join)", r"libgomp"),
    ("dropout (Philox RNG, masks, backward)", r"philox|[Dd]ropout"),
    ("GELU fwd/bwd (erf)", r"ActOp|erfc?f|_ZGV.*erf"),
    ("softmax fwd/bwd (exp)", r"Softmax|expf|_ZGV.*exp"),
    ("layer norm fwd/bwd", r"LayerNorm"),
    ("cross-entropy", r"cross_entropy|CrossEntropy"),
    ("bias add / residual add / bias grads (BinaryOp, sum_rows)", r"BinaryOp|sum_rows|bias"),
    ("permute / reshape copies, memcpy, memset", r"[Pp]ermute|memmove|memcpy|memset|copy_from|contiguous"),
    ("embedding gather / scatter-add", r"[Gg]ather|[Ee]mbedding|scatter|index"),
    ("optimizer: LAMB, clip, zero_grad", r"lamb|Lamb|grad_norm|clip|zero_grad|Optimizer"),
    ("allocator", r"Allocator|malloc|free|_int_"),
    ("kernel (page faults, scheduling)", r"\[kernel|\[k\]"),
]


def main():
    data = sys.argv[1]
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio", "-g", "none",
                          "--percent-limit", "0"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+(?: tid \d+)?)\s+\[(.)\]\s+(.*)$", line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()))
    totals, examples = {}, {}
    for pct, dso, kind, sym in rows:
        key = f"{dso} [{kind}] {sym}"
        cat = next((c for c, pat in CATEGORIES if re.search(pat, key)), "other")
        totals[cat] = totals.get(cat, 0.0) + pct
        examples.setdefault(cat, []).append((pct, f"{dso.split('/')[-1]} {sym}"))
    setup = sum(v for k, v in totals.items() if k.startswith("set-up"))
    steady = 100.0 - setup
    print(f"{'where':58} {'all':>7} {'steps':>7}   top symbols")
    for cat, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        share = "" if cat.startswith("set-up") else f"{100 * v / steady:6.1f}%"
        top = ", ".join(f"{s[:60]} {p:.1f}" for p, s in sorted(examples[cat], reverse=True)[:2])
        print(f"{cat:58} {v:6.1f}% {share:>7}   {top}")


if __name__ == "__main__":
    main()
