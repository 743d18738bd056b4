#!/usr/bin/python3
# bench_torch.py: PyTorch's side of `bertrain bench train`: the same BertForPreTraining training steps (own BERT,
# post-LN, GELU erf, tied decoder, masked-LM logits only at the masked positions, NSP head; clip_grad_norm_ 1.0 and
# torch.optim.AdamW) on the same synthetic batch shapes, printing the same fields.
#
# Run with Debian's /usr/bin/python3 (python3-torch 1.13). For its own process only, before torch is imported, it
# unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (set on this machine for old OpenBLAS builds; they slow Debian's
# torch, whose BLAS is OpenBLAS, by about 3x), sets OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS =
# --threads and torch.set_num_threads(--threads), and OMP_WAIT_POLICY=PASSIVE (otherwise OpenBLAS's and OpenMP's
# threads spin against each other on the cores): PyTorch measured at its best (issue 9).
import argparse
import json
import math
import os
import resource
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="tiny,mini,small,base", help="comma-separated: tiny, mini, small, base")
    ap.add_argument("--seq_lens", default="128,512")
    ap.add_argument("--batch_size", type=int, default=0, help="default 4096 / T (32 at 128, 8 at 512)")
    ap.add_argument("--max_predictions_per_seq", type=int, default=0, help="default 20 * T / 128 (20 at 128, 80 at 512)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="default: the cores available")
    ap.add_argument("--peak_gflops", type=float, default=0.0,
                    help="MFU denominator; default: run `<bertrain> bench peak` (the FMA loop bertrain measures)")
    ap.add_argument("--bertrain", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                       "bertrain"), help="bertrain binary used for the peak")
    ap.add_argument("--json_out", default="", help="append one JSON line per config to this file")
    ap.add_argument("--show_config", action="store_true", help="print torch.__config__.show() in full")
    ap.add_argument("--blas_dir", default="auto",
                    help="directory with an OpenBLAS libblas.so.3 put first on LD_LIBRARY_PATH for this process (the "
                         "script re-executes itself); 'auto': build/openblas/... from scripts/fetch_openblas.sh when "
                         "present; 'system': the system's libblas.so.3 as it is")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.warmup < 0 or a.threads < 1:
        ap.error("--steps >= 1, --warmup >= 0 and --threads >= 1 required")
    return a


ARGS = parse_args()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIVATE_OPENBLAS = os.path.join(REPO, "build", "openblas", "root", "usr", "lib", "x86_64-linux-gnu", "openblas-pthread")

# Debian's torch calls sgemm_ from libblas.so.3, whatever that alternative points to: where it is the reference
# BLAS (libblas3, no libopenblas0 installed) matmuls run at ~2 GFLOP/s. An OpenBLAS unpacked privately by
# scripts/fetch_openblas.sh is put first on the library path without changing the system. The loader reads
# LD_LIBRARY_PATH at start-up, so the script re-executes itself once with it (before touching other variables).
_blas_dir = {"auto": PRIVATE_OPENBLAS if os.path.isdir(PRIVATE_OPENBLAS) else "", "system": ""}.get(ARGS.blas_dir,
                                                                                                ARGS.blas_dir)
if _blas_dir and os.environ.get("BENCH_TORCH_BLAS_DIR") != _blas_dir:
    if not os.path.isfile(os.path.join(_blas_dir, "libblas.so.3")):
        sys.exit(f"bench_torch.py: --blas_dir {_blas_dir}: no libblas.so.3 there")
    os.environ["LD_LIBRARY_PATH"] = _blas_dir + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get(
        "LD_LIBRARY_PATH") else "")
    os.environ["BENCH_TORCH_BLAS_DIR"] = _blas_dir
    os.execv(sys.executable, [sys.executable] + sys.argv)

# The environment for this process only; set before torch (and with it OpenBLAS and libgomp) is loaded.
ENV_REMOVED = {k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_k] = str(ARGS.threads)
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the smoke test treats exit 77 as "skipped"
    print(f"bench_torch.py: torch is not importable with {sys.executable} ({e}); skipped", file=sys.stderr)
    sys.exit(77)

torch.set_num_threads(ARGS.threads)

SIZES = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "base": (12, 768, 12)}  # L, H, NH


class Config:
    def __init__(self, layers, hidden, heads):
        self.vocab_size, self.L, self.H, self.NH = 30522, layers, hidden, heads
        self.I, self.HS = 4 * hidden, hidden // heads
        self.max_positions, self.type_vocab, self.dropout, self.eps = 512, 2, 0.1, 1e-12


def training_flops(c, B, T, P):
    """Model FLOPs per training step, the formula of `bertrain bench train --help` (matmuls only)."""
    dense = 6.0 * B * T * c.L * (4 * c.H * c.H + 2 * c.H * c.I)
    attention = 3.0 * 2 * 2 * B * c.NH * T * T * c.HS * c.L
    mlm_head = 6.0 * B * P * (c.H * c.H + c.H * c.vocab_size)
    pooler_nsp = 6.0 * B * (c.H * c.H + 2 * c.H)
    return dense + attention + mlm_head + pooler_nsp


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.query, self.key, self.value = nn.Linear(c.H, c.H), nn.Linear(c.H, c.H), nn.Linear(c.H, c.H)
        self.attn_out, self.attn_norm = nn.Linear(c.H, c.H), nn.LayerNorm(c.H, eps=c.eps)
        self.inter, self.out, self.out_norm = nn.Linear(c.H, c.I), nn.Linear(c.I, c.H), nn.LayerNorm(c.H, eps=c.eps)

    def forward(self, x, mask_add):  # x (B, T, H), mask_add (B, 1, 1, T)
        c, (B, T, _) = self.c, x.shape

        def heads(t):
            return t.view(B, T, c.NH, c.HS).transpose(1, 2)  # (B, NH, T, HS)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(c.HS)) + mask_add
        probs = F.dropout(torch.softmax(scores, dim=-1), c.dropout, self.training)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, c.H)
        x = self.attn_norm(x + F.dropout(self.attn_out(ctx), c.dropout, self.training))
        h = F.gelu(self.inter(x))  # exact erf form
        return self.out_norm(x + F.dropout(self.out(h), c.dropout, self.training))


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.word = nn.Embedding(c.vocab_size, c.H)
        self.position = nn.Embedding(c.max_positions, c.H)
        self.token_type = nn.Embedding(c.type_vocab, c.H)
        self.emb_norm = nn.LayerNorm(c.H, eps=c.eps)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.L)])
        self.pooler = nn.Linear(c.H, c.H)
        self.transform, self.transform_norm = nn.Linear(c.H, c.H), nn.LayerNorm(c.H, eps=c.eps)
        self.decoder_bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.nsp = nn.Linear(c.H, 2)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, ids, seg, mask, positions, lm_ids, lm_w, nsp_labels):
        c, (B, T) = self.c, ids.shape
        pos = torch.arange(T).unsqueeze(0)
        x = self.word(ids) + self.position(pos) + self.token_type(seg)
        x = F.dropout(self.emb_norm(x), c.dropout, self.training)
        mask_add = ((1.0 - mask.to(x.dtype)) * -10000.0).view(B, 1, 1, T)
        for layer in self.layers:
            x = layer(x, mask_add)
        # masked LM at the P slots only: gather (B, P, H), transform, tied decoder
        h = torch.gather(x, 1, positions.unsqueeze(-1).expand(-1, -1, c.H))
        h = self.transform_norm(F.gelu(self.transform(h)))
        logits = torch.matmul(h, self.word.weight.t()) + self.decoder_bias  # (B, P, V)
        ce = F.cross_entropy(logits.view(-1, c.vocab_size), lm_ids.view(-1), reduction="none")
        mlm = (ce * lm_w.view(-1)).sum() / (lm_w.sum() + 1e-5)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        nsp = F.cross_entropy(self.nsp(pooled), nsp_labels)
        return mlm + nsp


def synthetic_batch(c, B, T, P, g):
    """Same distribution as bertrain's: [CLS] A [SEP] B [SEP], length uniform in [3T/4, T], padded tail, 15% of
    the real tokens masked at distinct positions (not [CLS]/[SEP]), slots beyond padded with weight 0."""
    ids = torch.zeros(B, T, dtype=torch.long)
    seg = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    positions = torch.zeros(B, P, dtype=torch.long)
    lm_ids = torch.zeros(B, P, dtype=torch.long)
    lm_w = torch.zeros(B, P)
    for b in range(B):
        length = T - int(torch.randint(T // 4 + 1, (1,), generator=g))
        split = 2 + int(torch.randint(length - 4, (1,), generator=g))
        ids[b, :length] = torch.randint(1000, c.vocab_size, (length,), generator=g)
        mask[b, :length] = 1
        seg[b, split + 1:length] = 1
        ids[b, 0], ids[b, split], ids[b, length - 1] = 101, 102, 102
        cand = torch.tensor([i for i in range(1, length - 1) if i != split])
        n = min(P, max(1, round(0.15 * length)))
        chosen, _ = torch.sort(cand[torch.randperm(len(cand), generator=g)[:n]])
        positions[b, :n] = chosen
        lm_ids[b, :n] = ids[b, chosen]
        lm_w[b, :n] = 1.0
        ids[b, chosen] = 103
    nsp = torch.randint(2, (B,), generator=g)
    return ids, seg, mask, positions, lm_ids, lm_w, nsp


def openblas_info():
    """(path of the BLAS library loaded in this process, openblas_get_corename(), openblas_get_config()); the
    last two say what the library is when it is not OpenBLAS."""
    import ctypes
    path = None
    with open("/proc/self/maps") as f:
        for line in f:
            name = line.split()[-1]
            if "/" in name and "blas" in os.path.basename(name).lower():
                path = name
                break
    if path is None:
        return None, "no BLAS library loaded", ""
    lib = ctypes.CDLL(path)
    out = []
    for fn in ("openblas_get_corename", "openblas_get_config"):
        try:
            f = getattr(lib, fn)
            f.restype = ctypes.c_char_p
            out.append(f().decode())
        except AttributeError:
            out.append("not OpenBLAS (no " + fn + "): likely the reference BLAS, matmuls ~50x slower")
    return path, out[0], out[1]


def measure_peak(args):
    if args.peak_gflops > 0:
        return args.peak_gflops, "--peak_gflops"
    import subprocess
    import tempfile
    if not os.access(args.bertrain, os.X_OK):
        return 0.0, f"no bertrain binary at {args.bertrain}: MFU not reported (give --peak_gflops or --bertrain)"
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as tmp:
        # bertrain's FMA loop runs with the user's environment, not this process's modified one
        env = dict(os.environ, **ENV_REMOVED)
        env.pop("BENCH_TORCH_BLAS_DIR", None)
        subprocess.run([args.bertrain, "bench", "peak", "--json_out", tmp.name], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        with open(tmp.name) as f:
            return json.loads(f.readline())["peak_gflops"], f"{args.bertrain} bench peak"


def run_config(name, T, args):
    c = Config(*SIZES[name])
    B = args.batch_size or max(1, 4096 // T)
    P = args.max_predictions_per_seq or max(1, 20 * T // 128)
    torch.manual_seed(args.seed)
    model = BertForPreTraining(c)
    model.train()
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "norm" in n)]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "norm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
    params = list(model.parameters())
    g = torch.Generator().manual_seed(args.seed)
    batches = [synthetic_batch(c, B, T, P, g) for _ in range(4)]
    times, fwd, bwd, optim, first, last = [], [], [], [], None, None
    for s in range(args.warmup + args.steps):
        batch = batches[s % len(batches)]
        t0 = time.perf_counter()
        loss = model(*batch)
        t1 = time.perf_counter()
        loss.backward()
        value = loss.item()
        del loss
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if not math.isfinite(value):
            raise SystemExit(f"bench_torch.py: {name} T={T}: non-finite loss at step {s}")
        first = value if first is None else first
        last = value
        if s >= args.warmup:
            times.append(t3 - t0)
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            optim.append(t3 - t2)

    def med(xs):
        xs = sorted(xs)
        n = len(xs)
        return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])

    median = med(times)
    times.sort()
    n = len(times)
    nparams = sum(p.numel() for p in params)
    return dict(model=name, seq_len=T, batch_size=B, max_predictions_per_seq=P, params=nparams,
                flops_per_step=training_flops(c, B, T, P), step_seconds_median=median,
                step_seconds_mean=sum(times) / n, step_seconds_min=times[0], step_seconds_max=times[-1],
                forward_seconds_median=med(fwd), backward_seconds_median=med(bwd), optimizer_seconds_median=med(optim),
                loss_first=first, loss_last=last)


def main():
    args = ARGS
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in SIZES:
            raise SystemExit(f"bench_torch.py: unknown model '{m}': expected one of {', '.join(SIZES)}")
    lens = [int(t) for t in args.seq_lens.split(",") if t]
    peak, peak_src = measure_peak(args)
    blas_path, corename, blas_config = openblas_info()
    env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    settings = {k: os.environ.get(k, "(unset)") for k in env_keys}
    print(f"bench_torch.py: torch {torch.__version__}, fp32, torch.get_num_threads() = {torch.get_num_threads()}, "
          f"interop threads {torch.get_num_interop_threads()}; {args.warmup} warm-up + {args.steps} timed steps per "
          "config (forward, backward, clip_grad_norm_ 1.0, torch.optim.AdamW, zero_grad(set_to_none=True))")
    print("environment of this process: " + " ".join(f"{k}={v}" for k, v in settings.items())
          + (f" (removed: {' '.join(f'{k}={v}' for k, v in ENV_REMOVED.items())})" if ENV_REMOVED else ""))
    print(f"OpenBLAS: {blas_path}, core {corename}, config {blas_config}")
    if args.show_config:
        print(torch.__config__.show())
    else:
        import re
        cfg = torch.__config__.show()
        keys = re.findall(r"(?:BLAS_INFO|LAPACK_INFO|USE_MKLDNN|USE_OPENMP)=[^,\s]*", cfg)
        keys += [ln.strip(" -") for ln in cfg.splitlines() if "CPU capability" in ln or "MKL-DNN" in ln]
        print("torch.__config__.show(): " + ", ".join(keys) + " (--show_config prints it all)")
    print(f"peak_gflops {peak:.1f} ({peak_src})" if peak > 0 else f"peak_gflops unknown: {peak_src}")
    print("optimizer: torch.optim.AdamW (issue 9 asks for AdamW on the PyTorch side; bertrain runs LAMB)")
    print(f"{'model':6} {'T':>4} {'B':>3} {'P':>3} {'params_M':>8} {'gflop_step':>10} {'step_ms':>9} {'seq_s':>8} "
          f"{'tokens_s':>10} {'gflops':>8} {'mfu':>6} {'rss_mib':>9}")
    for name in models:
        for T in lens:
            r = run_config(name, T, args)
            gflops = r["flops_per_step"] / r["step_seconds_median"] / 1e9
            seq_s = r["batch_size"] / r["step_seconds_median"]
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
            mfu = gflops / peak if peak > 0 else None
            print(f"{name:6} {T:4d} {r['batch_size']:3d} {r['max_predictions_per_seq']:3d} {r['params'] / 1e6:8.2f} "
                  f"{r['flops_per_step'] / 1e9:10.1f} {r['step_seconds_median'] * 1e3:9.1f} {seq_s:8.2f} "
                  f"{seq_s * T:10.0f} {gflops:8.1f} {(f'{100 * mfu:5.1f}%') if mfu is not None else '   n/a':>6} "
                  f"{rss:9.0f}")
            print(f"       step parts (medians): forward {r['forward_seconds_median'] * 1e3:.1f} ms, backward "
                  f"{r['backward_seconds_median'] * 1e3:.1f} ms, clip_grad_norm_ + AdamW + zero_grad "
                  f"{r['optimizer_seconds_median'] * 1e3:.1f} ms", flush=True)
            if args.json_out:
                r.update(bench="train", framework="torch", torch_version=torch.__version__, optimizer="AdamW",
                         threads=torch.get_num_threads(), warmup=args.warmup, steps=args.steps,
                         sequences_per_second=seq_s, tokens_per_second=seq_s * T, gflops=gflops,
                         peak_gflops=peak if peak > 0 else None, mfu=mfu, max_rss_mib=rss, environment=settings,
                         environment_removed=ENV_REMOVED, openblas_core=corename)
                with open(args.json_out, "a") as f:
                    f.write(json.dumps(r) + "\n")
    if len(models) * len(lens) > 1:
        print("rss_mib is the process's high-water mark (ru_maxrss) so far: run one config per process for "
              "per-config figures.")


if __name__ == "__main__":
    main()
