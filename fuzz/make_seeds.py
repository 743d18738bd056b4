#!/usr/bin/python3
"""make_seeds.py: writes the committed seed corpora of the fuzz targets (fuzz/corpus/<target>/), small inputs made
from the test data and by hand. Run from the repository root: /usr/bin/python3 fuzz/make_seeds.py
Needs h5py (python3-h5py) and spm_train (sentencepiece). Each seed starts with the target's flags byte where the
target has one (see the target's header comment). With target names as arguments (e.g. `make_seeds.py ner`) only
those corpora are rewritten."""
import sys
import json
import os
import shutil
import struct
import subprocess
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data, flags=None):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if flags is not None:
        data = bytes([flags]) + data
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def tokenizer():
    sample = read("data/gutenberg/sample_small.txt").decode("utf-8").splitlines()
    lines = [l for l in sample if len(l) > 40][:3]
    texts = lines + [
        "Ünïcödé ÀÉÎÕÜ naïve café Straße İstanbul ΣΊΣΥΦΟΣ ﬁ ½",
        "東京は日本の首都です。北京 서울 ไทย",
        "tab\there\nnewline\r\nzero\x00width\u200bjoiner\ufeff\u2028end",
        "[CLS] [SEP] [MASK] [UNK] ##ing don't can't u.s.a. $3.50 (1990) -- \"quoted\"",
        "x" * 210 + " " + "ab" * 30,
    ]
    for i, t in enumerate(texts):
        put("tokenizer", f"text{i}", t, flags=i % 6)
    put("tokenizer", "invalid_utf8", b"caf\xc3 \xff\xfe \xed\xa0\x80 \xf4\x90\x80\x80 ok", flags=1)


def vocab():
    v = read("tests/fixtures/train_parity/vocab.txt").split(b"\n")
    put("vocab", "train_parity_head", b"\n".join(v[:80]) + b"\n", flags=1)
    put("vocab", "crlf_blank_lines", b"[PAD]\r\n[UNK]\r\n\r\n[CLS]\r\n[SEP]\r\nhello\r\n##lo\r\n  the  \r\n", flags=1)
    put("vocab", "cased_no_unk", "[PAD]\nHello\n,\nworld\n!\nNa\n##ï\n##ve\n東\n京\n", flags=0)


def sentencepiece():
    text = "\n".join(l for l in read("data/gutenberg/sample_small.txt").decode("utf-8").splitlines()[:400] if l)
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "in.txt")
        with open(inp, "w") as f:
            f.write(text + "\nnaïve café 7,000 1,5 ``quoted''\n")
        rules = os.path.join(d, "rules.tsv")
        with open(rules, "w") as f:
            f.write("41\t61\n42\t62\nFB01\t66 69\n")  # A->a, B->b, U+FB01 -> f i: a small precompiled charsmap
        for name, extra in [("unigram_identity", ["--normalization_rule_name=identity"]),
                            ("bpe_identity", ["--model_type=bpe", "--normalization_rule_name=identity"]),
                            ("unigram_rules", ["--normalization_rule_tsv=" + rules])]:
            # Relative names: the model records its trainer flags, and the bytes must not depend on the temp dir.
            extra = [e.replace(rules, "rules.tsv") for e in extra]
            subprocess.run(["spm_train", "--input=in.txt", "--model_prefix=" + name, "--vocab_size=80",
                            "--hard_vocab_limit=false", "--seed_sentencepiece_size=1000", "--num_threads=1",
                            "--minloglevel=2"] + extra, check=True, capture_output=True, cwd=d)
            put("sentencepiece", name, read(os.path.join(d, name + ".model")), flags=1 if "unigram" in name else 0)


def safetensors_bytes(tensors, metadata=None):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off, blobs = 0, []
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def safetensors():
    f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
    put("safetensors", "mixed_dtypes", safetensors_bytes({
        "a": ("F32", [2, 2], f32(1, -2, 3.5, float("inf"))),
        "h": ("F16", [3], struct.pack("<3H", 0x3c00, 0x0001, 0x7e00)),
        "b": ("BF16", [2], struct.pack("<2H", 0x3f80, 0xff81)),
        "i": ("I64", [1], struct.pack("<q", -5)),
        "u": ("U8", [3], b"\x00\x7f\xff"),
        "e": ("F32", [0, 4], b""),
        "s": ("I8", [], b"\x05"),
        "x": ("BOOL", [1], b"\x01"),
    }, {"format": "pt"}), flags=0)
    # The tensors of a 1-layer BertForPreTraining with V=16, H=4, I=8, 8 positions: what the load_model mode's
    # tiny model holds, under Hugging Face names.
    V, H, I, P = 16, 4, 8, 8
    shapes = {"bert.embeddings.word_embeddings.weight": [V, H], "bert.embeddings.position_embeddings.weight": [P, H],
              "bert.embeddings.token_type_embeddings.weight": [2, H], "bert.embeddings.LayerNorm.weight": [H],
              "bert.embeddings.LayerNorm.bias": [H]}
    L = "bert.encoder.layer.0."
    for m in ["query", "key", "value"]:
        shapes[L + f"attention.self.{m}.weight"] = [H, H]
        shapes[L + f"attention.self.{m}.bias"] = [H]
    shapes.update({L + "attention.output.dense.weight": [H, H], L + "attention.output.dense.bias": [H],
                   L + "attention.output.LayerNorm.weight": [H], L + "attention.output.LayerNorm.bias": [H],
                   L + "intermediate.dense.weight": [I, H], L + "intermediate.dense.bias": [I],
                   L + "output.dense.weight": [H, I], L + "output.dense.bias": [H],
                   L + "output.LayerNorm.weight": [H], L + "output.LayerNorm.bias": [H],
                   "bert.pooler.dense.weight": [H, H], "bert.pooler.dense.bias": [H],
                   "cls.predictions.bias": [V], "cls.predictions.transform.dense.weight": [H, H],
                   "cls.predictions.transform.dense.bias": [H], "cls.predictions.transform.LayerNorm.weight": [H],
                   "cls.predictions.transform.LayerNorm.bias": [H], "cls.seq_relationship.weight": [2, H],
                   "cls.seq_relationship.bias": [2]})
    tensors = {}
    for k, s in shapes.items():
        n = int(np.prod(s))
        tensors[k] = ("F32", s, np.linspace(-1, 1, n, dtype=np.float32).tobytes())
    put("safetensors", "tiny_bert_load_model", safetensors_bytes(tensors, {"format": "pt"}), flags=1 | 2)
    # Hub-style old names (LayerNorm.gamma/beta, no "bert." prefix) in F16, strict off.
    old = {}
    for k, (_, s, _) in list(tensors.items())[:8]:
        k = k.replace("bert.", "").replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        n = int(np.prod(s))
        old[k] = ("F16", s, np.linspace(-1, 1, n, dtype=np.float16).tobytes())
    put("safetensors", "hub_names_f16", safetensors_bytes(old), flags=1)


def config():
    put("config", "train_parity", read("tests/fixtures/train_parity/config.json"))
    put("config", "golden_gelu_new", read("tests/fixtures/golden/config_gelu_new.json"))
    put("config", "google_bert_config", json.dumps({
        "attention_probs_dropout_prob": 0.1, "directionality": "bidi", "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 512,
        "max_position_embeddings": 512, "num_attention_heads": 2, "num_hidden_layers": 2,
        "pooler_fc_size": 768, "type_vocab_size": 2, "vocab_size": 30522}, indent=2))
    put("config", "id2label_floats", '{"hidden_size": 64.0, "num_attention_heads": 4, "intermediate_size": 256,'
        ' "vocab_size": 100, "id2label": {"0": "neg", "1": "neu", "2": "pos"}, "position_embedding_type": "absolute",'
        ' "layer_norm_eps": 1e-5, "hidden_act": "gelu_new", "num_hidden_layers": 1}')


def recipe():
    put("recipe", "train_parity_adamw", read("tests/fixtures/train_parity/recipe_adamw.json"), flags=0)
    put("recipe", "train_parity_lamb", read("tests/fixtures/train_parity/recipe_lamb.json"), flags=1)
    put("recipe", "quickstart", read("configs/pretrain/quickstart.json"), flags=0)


def train_state():
    recipe = json.loads(read("tests/fixtures/train_parity/recipe_lamb.json"))
    state = {"consecutive_skipped_steps": 0,
             "data_cursor": {"epoch": 0, "position": 20,
                             "rng": {"counter": 0, "seed": 13260384360604714397, "stream": 0, "used": 4}},
             "dropout_seed": 12345, "global_step": 110, "grad_accum_steps": 2, "learning_rate": 0.0,
             "micro_batch_index": 0, "optimizer_step": 10, "partial_losses": [0.0, 0.0, 0.0], "phase": 2,
             "phase_initialized": True, "phase_step": 10, "recipe": recipe, "seed": 12345,
             "skipped_steps": 1, "vocab_sha256": "ab" * 32, "world_size": 1}
    put("train_state", "pretraining", json.dumps(state, indent=2))
    put("train_state", "finetuning", json.dumps({"global_step": 30, "phase": 1, "best_metric": 0.75, "best_step": 20,
                                                 "primary_metric": "eval_accuracy", "epoch": 1.5,
                                                 "micro_batch_index": 2, "partial_losses": [1.5]}, indent=2))


def hdf5_shard():
    rng = np.random.default_rng(1)
    N, T, P = 3, 8, 2
    def datasets(int_dtype=np.int32, small=np.int8):
        return {"input_ids": rng.integers(0, 100, (N, T)).astype(int_dtype),
                "input_mask": np.ones((N, T), small), "segment_ids": np.zeros((N, T), small),
                "masked_lm_positions": np.array([[1, 3]] * N, int_dtype),
                "masked_lm_ids": rng.integers(0, 100, (N, P)).astype(int_dtype),
                "next_sentence_labels": np.array([0, 1, 0], small)}
    with tempfile.TemporaryDirectory() as d:
        for name, kw, dt in [("contiguous", {}, (np.int32, np.int8)),
                             ("gzip_chunked", {"compression": "gzip", "compression_opts": 4, "chunks": True},
                              (np.int32, np.int8)),
                             ("nvidia_int64", {}, (np.int64, np.int64))]:
            p = os.path.join(d, name + ".hdf5")
            with h5py.File(p, "w", libver="earliest", track_order=False) as f:
                for k, v in datasets(*dt).items():
                    f.create_dataset(k, data=v, track_times=False, **kw)
            put("hdf5_shard", name, read(p))


def glue():
    tasks = ["CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI"]
    for t, task in enumerate(tasks):
        d = f"tests/fixtures/glue/{task}"
        train = read(f"{d}/train.tsv")
        put("glue", f"{task}_train", train[:1500], flags=t)
        dev = "dev_matched.tsv" if task == "MNLI" else "dev.tsv"
        put("glue", f"{task}_dev", read(f"{d}/{dev}")[:1500], flags=t + 12)
        test = "test_matched.tsv" if task == "MNLI" else "test.tsv"
        put("glue", f"{task}_test", read(f"{d}/{test}")[:1500], flags=t + 24)
    for i, fmt in enumerate(["tsv", "csv", "jsonl"]):
        for s, split in enumerate(["train", "dev", "test"]):
            put("glue", f"generic_{fmt}_{split}", read(f"tests/fixtures/glue/generic/{fmt}/{split}.{fmt}"),
                flags=9 + i + 12 * s)


def squad():
    for v, name in [(1, "sample-v1.1.json"), (2, "sample-v2.0.json")]:
        data = read("tests/fixtures/squad/" + name)
        for training in (0, 1):
            put("squad_data", f"v{v}_{'train' if training else 'predict'}", data,
                flags=training | (2 if v == 2 else 0))
    put("squad_predictions", "predictions", json.dumps(
        {"q1": "Denver Broncos", "q2": "", "q3": "the  Cat's  (hat)!", "q4": "Ünïcödé 東京", "q5": "a an the"},
        indent=4))
    put("squad_predictions", "escapes", '{"\\u00e9t\\u00e9": "caf\\u00e9\\n", "x": "\\ud83d\\ude00"}')
    put("squad_na_prob", "null_odds", json.dumps({"q1": -3.5, "q2": 0.25, "q3": 12, "q4": 1e-300, "q5": 0.25},
                                                 indent=4))


def ner():
    # Hand-made, in the layouts of the readers' tests (tests/tasks/ner_test.cpp) and of the shared data sets:
    # WNUT/BTC (TAB, BIO, hashtags, a lone-TAB break), WikiGold (spaces, IOB1, -DOCSTART-), IOBES, UNER .iob2
    # (comments, 5 columns, Chinese words) and CoNLL-U (multiword tokens, empty nodes, UPOS/XPOS).
    # flags: format + 3 * scheme + 12 * xpos + 24 * iobes model + 48 * length class (see targets/ner.cpp).
    conll, iob2, conllu = 0, 1, 2
    iob1, bio, iobes, none = 0, 1, 2, 3
    put("ner", "wnut_bio", "Hi\tO\n#yolo\tO\n\t\n\n \nParis\tB-location\n\tO\nrocks\tO\n"
        "Johan\tB-person\nJohanson\tI-person\nlives\tO\nin\tO\nOslo\tB-location\n.\tO\n", flags=conll + 3 * bio + 48)
    put("ner", "wikigold_iob1", "-DOCSTART- O\n\nThe O\nEU I-ORG\nrejects O\nGerman I-MISC\ncall O\n\n"
        "Peter I-PER\nBlackburn I-PER\nB-PER B-PER\n\n-DOCSTART- O\n\nBRUSSELS I-LOC\n", flags=conll + 3 * iob1 + 96)
    put("ner", "iobes", "New\tB-LOC\nYork\tI-LOC\nCity\tE-LOC\nis\tO\nbig\tO\n\nObama\tS-PER\nspoke\tO\n",
        flags=conll + 3 * iobes + 24 + 144)
    put("ner", "uner_zh_iob2", "# sent_id = 1\n# text = 北京大学在北京\n1\t北京\tB-ORG\t-\t-\n2\t大学\tI-ORG\t-\t-\n"
        "3\t在\tO\t-\t-\n4\t北京\tB-LOC\t-\t-\n\n# sent_id = 2\n1\tJohn\tB-PER\t-\t-\n", flags=iob2 + 3 * bio + 48)
    ud = ("# sent_id = ewt-1\n# text = don't go\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "1\tdo\tdo\tAUX\tVBP\tMood=Ind\t3\taux\t_\t_\n2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
          "2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No\n\n"
          "1\tÜber\tüber\tADP\tAPPR\t_\t0\troot\t_\t_\n")
    put("ner", "conllu_upos", ud, flags=conllu + 3 * none)
    put("ner", "conllu_xpos", ud, flags=conllu + 3 * none + 12 + 144)
    put("ner", "pos_none", "The DT\nquick JJ\nfox NN\n\nruns VBZ\n", flags=conll + 3 * none + 48)


def tf_checkpoint():
    # The committed bundles (tests/fixtures/tf_checkpoints): flags, the index length (2 bytes LE), the index, the
    # data shard (see targets/tf_checkpoint.cpp). Each through the reader (flags 0) and load_model (1, and 7:
    # require_backbone and strict) for the BERT one.
    base = "tests/fixtures/tf_checkpoints/"
    bundles = [("keras_bert_tiny", base + "keras_bert_tiny/bert_model.ckpt")] + [
        (m, f"{base}tf_serving/{m}/variables") for m in
        ["saved_model_counter", "saved_model_half_plus_two_cpu", "saved_model_half_plus_two_mkl",
         "saved_model_half_plus_two_tf2_cpu", "tf_text_regression"]]
    for name, prefix in bundles:
        index, shard = read(prefix + ".index"), read(prefix + ".data-00000-of-00001")
        body = struct.pack("<H", len(index)) + index + shard
        put("tf_checkpoint", name, body, flags=0)
        if name == "keras_bert_tiny":
            put("tf_checkpoint", name + "_load_model", body, flags=1)
            put("tf_checkpoint", name + "_load_model_strict", body, flags=7)


def torch_checkpoint():
    # torch.save of state dicts (Debian's python3-torch): whole zips (flags 0), one through load_model (flags 1 | 4:
    # require_backbone), and data.pkl alone (flags 2: targets/torch_checkpoint.cpp packs it beside eight 64-byte
    # storage records, so every storage here is 64 bytes), plus pickles calling what the reader must refuse.
    import collections
    import io
    import pickle
    import zipfile

    import torch

    def saved(sd):
        buf = io.BytesIO()
        torch.save(sd, buf)
        return buf.getvalue()

    def data_pkl(zbytes):
        with zipfile.ZipFile(io.BytesIO(zbytes)) as z:
            return z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])

    base = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    mixed = collections.OrderedDict([
        ("w", base), ("w_t", base.t()), ("row", base[2]), ("scalar", base[1, 1]),
        ("half", torch.linspace(-2, 2, 32).half()), ("bf16", torch.linspace(-2, 2, 32).bfloat16()),
        ("long", torch.arange(8)), ("bool", torch.arange(64) % 3 == 0),
        ("param", torch.nn.Parameter(torch.ones(16))), ("int8", torch.arange(64, dtype=torch.int8)),
        ("expanded", torch.arange(4, dtype=torch.float64).expand(4, 2, 4)[0]),
    ])
    put("torch_checkpoint", "mixed_dtypes_views", saved(mixed), flags=0)
    put("torch_checkpoint", "linear_state_dict", saved(torch.nn.Linear(3, 2).state_dict()), flags=0)
    put("torch_checkpoint", "empty_state_dict", saved(collections.OrderedDict()), flags=0)
    # A tiny BERT's state dict under Hugging Face names (targets/torch_checkpoint.cpp's model: V 16, H 4, I 8, P 8).
    g = torch.Generator().manual_seed(0)
    shapes = {"bert.embeddings.word_embeddings.weight": (16, 4), "bert.embeddings.position_embeddings.weight": (8, 4),
              "bert.embeddings.token_type_embeddings.weight": (2, 4), "bert.embeddings.LayerNorm.gamma": (4,),
              "bert.embeddings.LayerNorm.beta": (4,)}
    pre = "bert.encoder.layer.0."
    for n, shp in [("attention.self.query", (4, 4)), ("attention.self.key", (4, 4)), ("attention.self.value", (4, 4)),
                   ("attention.output.dense", (4, 4)), ("intermediate.dense", (8, 4)), ("output.dense", (4, 8))]:
        shapes[pre + n + ".weight"] = shp
        shapes[pre + n + ".bias"] = (shp[0],)
    for n in ["attention.output.LayerNorm", "output.LayerNorm"]:
        shapes[pre + n + ".weight"] = (4,)
        shapes[pre + n + ".bias"] = (4,)
    sd = collections.OrderedDict((k, torch.randn(*v, generator=g)) for k, v in shapes.items())
    sd["cls.predictions.bias"] = torch.zeros(16)
    sd["cls.predictions.decoder.weight"] = sd["bert.embeddings.word_embeddings.weight"]
    sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"]
    sd["bert.embeddings.position_ids"] = torch.arange(8).expand((1, -1))
    put("torch_checkpoint", "tiny_bert_load_model", saved(sd), flags=1 | 4)
    put("torch_checkpoint", "tiny_bert_f16", saved(collections.OrderedDict((k, v.half() if v.is_floating_point() else v)
                                                                           for k, v in sd.items())), flags=0)
    # data.pkl alone: storages of 64 bytes, keys 0..7 in order of first use.
    b16 = torch.arange(16, dtype=torch.float32)
    pk = collections.OrderedDict([
        ("a", b16.reshape(4, 4)), ("a_t", b16.reshape(4, 4).t()), ("off", b16[4:8]),
        ("h", torch.zeros(32, dtype=torch.float16)), ("l", torch.arange(8)), ("b", torch.ones(64, dtype=torch.bool)),
        ("d", torch.ones(8, dtype=torch.float64).reshape(2, 4)), ("i", torch.arange(16, dtype=torch.int32)),
        ("bf", torch.zeros(32, dtype=torch.bfloat16))])
    put("torch_checkpoint", "pickle_only_views", data_pkl(saved(pk)), flags=2)
    put("torch_checkpoint", "pickle_only_metadata", data_pkl(saved(torch.nn.Sequential(
        torch.nn.Linear(4, 4, bias=False), torch.nn.LayerNorm(16)).state_dict())), flags=2)

    class Call:
        def __init__(self, fn, args):
            self.fn, self.args = fn, args

        def __reduce__(self):
            return (self.fn, self.args)

    import builtins
    import os
    import subprocess
    for name, obj in [("os_system", Call(os.system, ("true",))), ("eval", Call(builtins.eval, ("1",))),
                      ("popen", Call(subprocess.Popen, (["true"],)))]:
        put("torch_checkpoint", "refused_" + name, pickle.dumps(collections.OrderedDict([("x", obj)]), protocol=2),
            flags=2)
    put("torch_checkpoint", "refused_protocol4", pickle.dumps({"a": 1, "b": [1.5, None, True]}, protocol=4), flags=2)


if __name__ == "__main__":
    makers = [tokenizer, vocab, sentencepiece, safetensors, config, recipe, train_state, hdf5_shard, glue, squad, ner,
              tf_checkpoint, torch_checkpoint]
    if len(sys.argv) > 1:
        makers = [f for f in makers if f.__name__ in sys.argv[1:]]
        for f in makers:
            shutil.rmtree(os.path.join(OUT, f.__name__), ignore_errors=True)
    else:
        shutil.rmtree(OUT, ignore_errors=True)
    for f in makers:
        f()
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(OUT) for f in fs)
    print(f"make_seeds.py: {sum(len(fs) for _, _, fs in os.walk(OUT))} seeds, {total} bytes in {OUT}")
