#!/usr/bin/python3
# bench_torch.py: PyTorch's side of `bertrain bench train`: the same BertForPreTraining training steps (own BERT,
# post-LN, GELU erf, tied decoder, masked-LM logits only at the masked positions, NSP head; clip_grad_norm_ 1.0 and
# torch.optim.AdamW) on the same synthetic batch shapes, printing the same fields.
# --mode finetune: PyTorch's side of `bertrain bench finetune`: BertForSequenceClassification training steps on the
# same task file (a GLUE-layout TSV: QNLI's, or a generic one with named columns), tokenized by the independent
# reference tokenizer tests/reference/bert_tokenizer_ref.py (google-research/bert's rules, as bertrain's), batched as a
# Hugging Face user gets it: transformers' DataCollatorWithPadding (each batch padded to its longest example,
# pad_to_multiple_of None unless given) and TrainingArguments.group_by_length (LengthGroupedSampler's
# get_length_grouped_indices: randperm, mega-batches of min(n / (4 B), 50) batches sorted by length, longest first,
# the longest one moved to the front); step: collate, forward, cross-entropy, backward, clip_grad_norm_ 1.0,
# torch.optim.AdamW, the linear schedule (LambdaLR), zero_grad. Timed steps at the same batch positions as bertrain's
# (spread evenly over epoch 0), reported from sums over the timed steps.
#
# Run with Debian's /usr/bin/python3 (python3-torch 1.13). For its own process only, before torch is imported, it
# unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (set on this machine for old OpenBLAS builds; they slow Debian's
# torch, whose BLAS is OpenBLAS, by about 3x), sets OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS =
# --threads and torch.set_num_threads(--threads), and OMP_WAIT_POLICY=PASSIVE (otherwise OpenBLAS's and OpenMP's
# threads spin against each other on the cores): PyTorch measured at its best.
import argparse
import json
import math
import os
import resource
import sys
import time


REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mode", choices=("train", "finetune"), default="train",
                    help="train: pretraining steps on synthetic batches; finetune: classification on a task file")
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
    ap.add_argument("--bertrain", default=os.path.join(REPO, "build", "bertrain"), help="bertrain binary used for the peak")
    ap.add_argument("--json_out", default="", help="append one JSON line per config to this file")
    ap.add_argument("--show_config", action="store_true", help="print torch.__config__.show() in full")
    ap.add_argument("--blas_dir", default="auto",
                    help="directory with an OpenBLAS libblas.so.3 put first on LD_LIBRARY_PATH for this process (the "
                         "script re-executes itself); 'auto': build/openblas/... from tools/bench/scripts/fetch_openblas.sh when "
                         "present; 'system': the system's libblas.so.3 as it is")
    ft = ap.add_argument_group("--mode finetune")
    ft.add_argument("--task_name", default="QNLI", help="QNLI (train.tsv: index, question, sentence, label) or generic")
    ft.add_argument("--data_dir", default="", help="directory with the task's train.tsv")
    ft.add_argument("--vocab_file", default=os.path.join(REPO, "data", "vocab", "bert-base-uncased-vocab.txt"))
    ft.add_argument("--do_lower_case", default="true")
    ft.add_argument("--text_a_column", default="sentence", help="generic task: first text column")
    ft.add_argument("--text_b_column", default="", help="generic task: second text column (pairs)")
    ft.add_argument("--label_column", default="label", help="generic task: label column")
    ft.add_argument("--labels", default="", help="generic task: comma-separated label list")
    ft.add_argument("--max_seq_length", type=int, default=128)
    ft.add_argument("--pad_to_multiple_of", type=int, default=0, help="DataCollatorWithPadding's (0: None)")
    ft.add_argument("--no_group_by_length", action="store_true", help="a plain RandomSampler order instead")
    ft.add_argument("--learning_rate", type=float, default=5e-5)
    a = ap.parse_args(argv)
    if a.mode == "finetune" and not a.data_dir:
        ap.error("--mode finetune needs --data_dir")
    if a.steps < 1 or a.warmup < 0 or a.threads < 1:
        ap.error("--steps >= 1, --warmup >= 0 and --threads >= 1 required")
    return a


ARGS = parse_args()
PRIVATE_OPENBLAS = os.path.join(REPO, "build", "openblas", "root", "usr", "lib", "x86_64-linux-gnu", "openblas-pthread")

# Debian's torch calls sgemm_ from libblas.so.3, whatever that alternative points to: where it is the reference
# BLAS (libblas3, no libopenblas0 installed) matmuls run at ~2 GFLOP/s. An OpenBLAS unpacked privately by
# tools/bench/scripts/fetch_openblas.sh is put first on the library path without changing the system. The loader reads
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


# ---- --mode finetune ----

class BertForSequenceClassification(nn.Module):
    """transformers' BertForSequenceClassification on the same encoder: pooler (tanh of [CLS]'s dense), dropout,
    classifier, cross-entropy."""

    def __init__(self, c, num_labels):
        super().__init__()
        self.c = c
        self.word = nn.Embedding(c.vocab_size, c.H)
        self.position = nn.Embedding(c.max_positions, c.H)
        self.token_type = nn.Embedding(c.type_vocab, c.H)
        self.emb_norm = nn.LayerNorm(c.H, eps=c.eps)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.L)])
        self.pooler = nn.Linear(c.H, c.H)
        self.classifier = nn.Linear(c.H, num_labels)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, ids, seg, mask, labels):
        c, (B, T) = self.c, ids.shape
        x = self.word(ids) + self.position(torch.arange(T).unsqueeze(0)) + self.token_type(seg)
        x = F.dropout(self.emb_norm(x), c.dropout, self.training)
        mask_add = ((1.0 - mask.to(x.dtype)) * -10000.0).view(B, 1, 1, T)
        for layer in self.layers:
            x = layer(x, mask_add)
        pooled = F.dropout(torch.tanh(self.pooler(x[:, 0])), c.dropout, self.training)
        return F.cross_entropy(self.classifier(pooled), labels)


def read_task(args):
    """(texts_a, texts_b or None, label ids, label list) of data_dir/train.tsv, read as run_classifier's _read_tsv
    (quotes literal). QNLI: columns question, sentence, label (entailment, not_entailment); generic: the named
    columns and --labels."""
    path = os.path.join(args.data_dir, "train.tsv")
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n").rstrip("\r") for ln in f]
    header, rows = lines[0].split("\t"), [ln.split("\t") for ln in lines[1:]]
    if args.task_name.lower() == "qnli":
        cols, labels = ("question", "sentence", "label"), ["entailment", "not_entailment"]
    elif args.task_name.lower() == "generic":
        cols, labels = (args.text_a_column, args.text_b_column, args.label_column), [x for x in args.labels.split(",") if x]
        if not labels:
            raise SystemExit("bench_torch.py: the generic task needs --labels")
    else:
        raise SystemExit(f"bench_torch.py: --mode finetune reads QNLI or generic TSV files, not {args.task_name}")
    idx = []
    for name in cols:
        if name and name not in header:
            raise SystemExit(f"bench_torch.py: {path}: line 1: no column '{name}' in the header {header}")
        idx.append(header.index(name) if name else None)
    a, b, y = [], [], []
    for n, r in enumerate(rows, start=2):
        if len(r) != len(header):
            raise SystemExit(f"bench_torch.py: {path}: line {n}: {len(r)} fields, the header has {len(header)}")
        if r[idx[2]] not in labels:
            raise SystemExit(f"bench_torch.py: {path}: line {n}: label '{r[idx[2]]}' not in {labels}")
        a.append(r[idx[0]])
        b.append(r[idx[1]] if idx[1] is not None else None)
        y.append(labels.index(r[idx[2]]))
    return a, (b if idx[1] is not None else None), y, labels


def featurize(args, texts_a, texts_b):
    """input ids and segment ids of each example as run_classifier.py's convert_single_example (no padding):
    [CLS] a [SEP] (b [SEP]); pairs truncated by _truncate_seq_pair (pop from the longer, from the back) to
    max_seq_length - 3, single sentences to max_seq_length - 2; an empty b makes a single sentence."""
    sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
    import bert_tokenizer_ref as ref
    vocab = ref.load_vocab(args.vocab_file)
    lower = args.do_lower_case.lower() in ("true", "1")

    def pieces(text):
        return [p for t in ref.basic_tokenize(text, lower) for p in ref.wordpiece(t, vocab)]

    feats = []
    for i, ta in enumerate(texts_a):
        a = pieces(ta)
        b = pieces(texts_b[i]) if texts_b is not None and texts_b[i] else []
        if b:
            while len(a) + len(b) > args.max_seq_length - 3:
                (a if len(a) > len(b) else b).pop()
        else:
            a = a[:args.max_seq_length - 2]
        toks = ["[CLS]"] + a + ["[SEP]"] + (b + ["[SEP]"] if b else [])
        seg = [0] * (len(a) + 2) + [1] * (len(b) + 1 if b else 0)
        feats.append(([vocab[t] for t in toks], seg))
    return feats


def length_grouped_indices(lengths, batch_size, g):
    """transformers' trainer_pt_utils.get_length_grouped_indices (mega_batch_mult None)."""
    mult = min(len(lengths) // (batch_size * 4), 50) or 1
    indices = torch.randperm(len(lengths), generator=g)
    size = mult * batch_size
    megabatches = [sorted(indices[i:i + size].tolist(), key=lambda k: lengths[k], reverse=True)
                   for i in range(0, len(lengths), size)]
    maxima = [lengths[m[0]] for m in megabatches]
    j = int(torch.argmax(torch.tensor(maxima)).item())
    megabatches[0][0], megabatches[j][0] = megabatches[j][0], megabatches[0][0]
    return [k for m in megabatches for k in m]


def collate(feats, labels, rows, multiple):
    """DataCollatorWithPadding: pad to the batch's longest (rounded up to `multiple` when > 0) with 0 ids,
    0 segments and a 0 attention mask; python lists to tensors."""
    T = max(len(feats[r][0]) for r in rows)
    if multiple > 0:
        T = (T + multiple - 1) // multiple * multiple
    ids = [feats[r][0] + [0] * (T - len(feats[r][0])) for r in rows]
    seg = [feats[r][1] + [0] * (T - len(feats[r][1])) for r in rows]
    mask = [[1] * len(feats[r][0]) + [0] * (T - len(feats[r][0])) for r in rows]
    return (torch.tensor(ids), torch.tensor(seg), torch.tensor(mask), torch.tensor([labels[r] for r in rows])), T


def classifier_flops(c, lengths, num_labels):
    """bertrain's bert_classifier_flops (include/bertrain/models/flops.h): on real tokens, each sequence at its own
    length: 6 * sum L_b * L * (4H^2 + 2HI) + 12 * sum L_b^2 * NH * HS * L + 6 * B * (H^2 + H C)."""
    tokens, squares = sum(lengths), sum(x * x for x in lengths)
    return (6.0 * tokens * c.L * (4 * c.H * c.H + 2 * c.H * c.I) + 12.0 * squares * c.NH * c.HS * c.L
            + 6.0 * len(lengths) * (c.H * c.H + c.H * num_labels))


def timed_positions(steps_per_epoch, steps):
    """bertrain bench finetune's: timed step k takes batch floor((2k + 1) * S / (2 steps)) of epoch 0."""
    return [(2 * k + 1) * steps_per_epoch // (2 * steps) for k in range(steps)]


def run_finetune_config(name, args, task):
    texts_a, texts_b, labels, feats, label_names = task
    c = Config(*SIZES[name])
    B, n = args.batch_size or 32, len(feats)
    if n < B:
        raise SystemExit(f"bench_torch.py: {n} examples are fewer than one batch of {B}")
    lengths = [len(f[0]) for f in feats]
    torch.manual_seed(args.seed)
    model = BertForSequenceClassification(c, len(label_names))
    model.train()
    decay = [p for nm, p in model.named_parameters() if not ("bias" in nm or "norm" in nm)]
    no_decay = [p for nm, p in model.named_parameters() if "bias" in nm or "norm" in nm]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    steps_per_epoch = n // B
    total = int(n / B * 3)  # 3 epochs
    warm = int(0.1 * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    params = list(model.parameters())
    g = torch.Generator().manual_seed(args.seed)
    order = (torch.randperm(n, generator=g).tolist() if args.no_group_by_length
             else length_grouped_indices(lengths, B, g))
    timed = timed_positions(steps_per_epoch, args.steps)
    rec = dict(positions=[], batch_seq_lengths=[], batch_real_tokens=[], batch_lengths=[], step_seconds=[], fwd=[],
               bwd=[], opt=[],
               flops_real=0.0, flops_padded=0.0)
    first = last = None
    for s in range(args.warmup + args.steps):
        is_timed = s >= args.warmup
        pos = timed[s - args.warmup] if is_timed else s % steps_per_epoch
        rows = order[pos * B:(pos + 1) * B]
        t0 = time.perf_counter()
        batch, T = collate(feats, labels, rows, args.pad_to_multiple_of)
        loss = model(*batch)
        t1 = time.perf_counter()
        loss.backward()
        value = loss.item()
        del loss
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if not math.isfinite(value):
            raise SystemExit(f"bench_torch.py: {name}: non-finite loss at step {s}")
        first = value if first is None else first
        last = value
        if is_timed:
            real = [lengths[r] for r in rows]
            rec["positions"].append(pos)
            rec["batch_seq_lengths"].append(T)
            rec["batch_real_tokens"].append(sum(real))
            rec["batch_lengths"].append(real)
            rec["step_seconds"].append(t3 - t0)
            rec["fwd"].append(t1 - t0)
            rec["bwd"].append(t2 - t1)
            rec["opt"].append(t3 - t2)
            rec["flops_real"] += classifier_flops(c, real, len(label_names))
            rec["flops_padded"] += classifier_flops(c, [T] * B, len(label_names))
    rec.update(params=sum(p.numel() for p in params), loss_first=first, loss_last=last, batch_size=B)
    return rec


def finetune_main(args):
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in SIZES:
            raise SystemExit(f"bench_torch.py: unknown model '{m}': expected one of {', '.join(SIZES)}")
    texts_a, texts_b, labels, label_names = read_task(args)
    feats = featurize(args, texts_a, texts_b)
    task = (texts_a, texts_b, labels, feats, label_names)
    lengths = [len(f[0]) for f in feats]
    mean_len = sum(lengths) / len(lengths)
    peak, peak_src = measure_peak(args)
    blas_path, corename, blas_config = openblas_info()
    env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    settings = {k: os.environ.get(k, "(unset)") for k in env_keys}
    gbl = not args.no_group_by_length
    print(f"bench_torch.py --mode finetune: torch {torch.__version__}, fp32, {torch.get_num_threads()} threads; "
          f"{args.task_name} {os.path.join(args.data_dir, 'train.tsv')}: {len(feats)} examples, real tokens per "
          f"example mean {mean_len:.2f}, max {max(lengths)}; batch {args.batch_size or 32}, DataCollatorWithPadding "
          f"(pad_to_multiple_of {args.pad_to_multiple_of or None}), group_by_length {gbl}")
    print(f"{args.warmup} warm-up steps (batches 0..), {args.steps} timed steps at batches spread over epoch 0; a step: "
          "collate, forward, loss, backward, clip_grad_norm_ 1.0, AdamW, LambdaLR, zero_grad(set_to_none=True)")
    print("environment of this process: " + " ".join(f"{k}={v}" for k, v in settings.items())
          + (f" (removed: {' '.join(f'{k}={v}' for k, v in ENV_REMOVED.items())})" if ENV_REMOVED else ""))
    print(f"OpenBLAS: {blas_path}, core {corename}, config {blas_config}")
    print(f"peak_gflops {peak:.1f} ({peak_src})" if peak > 0 else f"peak_gflops unknown: {peak_src}")
    print(f"{'model':6} {'path':12} {'mean_T':>6} {'pad_frac':>8} {'step_ms':>9} {'real_tok_s':>11} {'seq_s':>8} "
          f"{'gflops_re':>10} {'mfu_re':>7} {'rss_mib':>8}")
    path = "torch_dyn" + ("+gbl" if gbl else "")
    for name in models:
        r = run_finetune_config(name, args, task)
        total = sum(r["step_seconds"])
        real = float(sum(r["batch_real_tokens"]))
        slots = float(sum(T * r["batch_size"] for T in r["batch_seq_lengths"]))
        seqs = float(r["batch_size"] * len(r["step_seconds"]))
        gflops = r["flops_real"] / total / 1e9
        mfu = gflops / peak if peak > 0 else None
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

        def med(xs):
            xs = sorted(xs)
            k = len(xs)
            return xs[k // 2] if k % 2 else 0.5 * (xs[k // 2 - 1] + xs[k // 2])

        print(f"{name:6} {path:12} {slots / seqs:6.1f} {100 * (1 - real / slots):7.1f}% {1e3 * total / len(r['step_seconds']):9.1f} "
              f"{real / total:11.0f} {seqs / total:8.2f} {gflops:10.1f} "
              f"{(f'{100 * mfu:5.1f}%') if mfu is not None else '   n/a':>7} {rss:8.0f}")
        print(f"       step parts (medians): collate + forward + loss {1e3 * med(r['fwd']):.1f} ms, backward "
              f"{1e3 * med(r['bwd']):.1f} ms, clip_grad_norm_ + AdamW + zero_grad {1e3 * med(r['opt']):.1f} ms",
              flush=True)
        if args.json_out:
            out = dict(bench="finetune", framework="torch", torch_version=torch.__version__, task=args.task_name,
                       train_file=os.path.join(args.data_dir, "train.tsv"), model=name, path=path,
                       group_by_length=gbl, pad_to_multiple_of=args.pad_to_multiple_of,
                       max_seq_length=args.max_seq_length, batch_size=r["batch_size"], examples=len(feats),
                       mean_real_length=mean_len, max_real_length=max(lengths), params=r["params"],
                       optimizer="AdamW", threads=torch.get_num_threads(), warmup=args.warmup, steps=args.steps,
                       positions=r["positions"], batch_seq_lengths=r["batch_seq_lengths"],
                       batch_real_tokens=r["batch_real_tokens"], batch_lengths=r["batch_lengths"],
                       step_seconds=r["step_seconds"],
                       step_seconds_median=med(r["step_seconds"]), total_seconds=total,
                       forward_seconds_median=med(r["fwd"]), backward_seconds_median=med(r["bwd"]),
                       optimizer_seconds_median=med(r["opt"]), real_tokens=real, padded_tokens=slots,
                       padding_fraction=1 - real / slots, real_tokens_per_second=real / total,
                       sequences_per_second=seqs / total, flops_real=r["flops_real"], flops_padded=r["flops_padded"],
                       gflops_real=gflops, peak_gflops=peak if peak > 0 else None, mfu=mfu, precision="fp32",
                       max_rss_mib=rss, loss_first=r["loss_first"], loss_last=r["loss_last"], environment=settings,
                       environment_removed=ENV_REMOVED, openblas_core=corename)
            with open(args.json_out, "a") as f:
                f.write(json.dumps(out) + "\n")


def main():
    args = ARGS
    if args.mode == "finetune":
        return finetune_main(args)
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
    print("optimizer: torch.optim.AdamW (the usual PyTorch choice; bertrain runs LAMB)")
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
