#!/usr/bin/env bash
# pipeline_predict_test.sh BUILD_DIR SOURCE_DIR [EXAMPLES_DIR WORK_DIR]: checkpoints that describe themselves. From the tiny TF checkpoint
# (bert_config.json and vocab.txt beside the prefix, no casing or vocab flag), run-classifier, run-ner and run-squad
# finetune for a few steps; each best/ directory then names its architecture, labels and length, and
#  - the command's own --do_predict from best/ (no --vocab_file, --do_lower_case, --labels),
#  - `bertrain predict --checkpoint best --input FILE` with no other flag, and
#  - the example program of the task (tests/project/consumer/*.cpp, through the pipeline API)
# give the same labels and probabilities (to 1e-6), entities, answers and, for extract-features, vectors. A flag
# that contradicts the checkpoint is refused with one line, and a Hugging Face directory (tokenizer_config.json
# with transformers' "no limit" length) gives the same defaults. EXAMPLES_DIR (default BUILD_DIR/pipeline_examples)
# holds the example programs: tests/project/consumer_test.sh passes those it built against the installed package.
set -euo pipefail
build=$1
bin=$build/bertrain
ex=${3:-$build/pipeline_examples}
ck=$2/tests/fixtures/tf_checkpoints/keras_bert_tiny
work=${4:-$build/pipeline_predict_test}
rm -rf "$work"
mkdir -p "$work/cls"
cd "$work"
run() { "$bin" --log_level warn --num_threads 1 "$@"; }
refused() {  # $1 = pattern; the rest: a command that must fail with one error line naming it
  if "$bin" --log_level warn --num_threads 1 "${@:2}" > refused.log 2>&1; then
    echo "expected a refusal: ${*:2}" >&2
    exit 1
  fi
  grep -q -- "$1" refused.log || { echo "expected '$1' in:" >&2; cat refused.log >&2; exit 1; }
  [ "$(grep -c . refused.log)" = 1 ] || { echo "expected one line:" >&2; cat refused.log >&2; exit 1; }
}
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# --- text classification -------------------------------------------------------------------------------------
printf 'sentence,label\n' > cls/train.csv
for i in $(seq 1 8); do printf 'all work and no play,dull\njack a dull boy,play\nmakes jack,play\n' >> cls/train.csv; done
cp cls/train.csv cls/dev.csv
printf 'sentence\nall work\njack makes a dull boy\nno play\nboy boy jack\n' > cls/test.csv
run run-classifier --task_name generic --data_dir cls --labels dull,play --init_checkpoint "$ck/bert_model.ckpt" \
  --max_seq_length 12 --train_batch_size 4 --max_steps 6 --learning_rate 1e-3 --output_dir rc --do_train --do_eval
[ "$(json rc/best/config.json 'd["architectures"][0], d["id2label"], d["finetuning_task"]')" = \
  "BertForSequenceClassification {'0': 'dull', '1': 'play'} generic" ]
[ "$(json rc/best/tokenizer_config.json 'd["model_max_length"], d["do_lower_case"], d["tokenize_chinese_chars"]')" = \
  "12 True True" ]
cmp rc/best/vocab.txt "$ck/vocab.txt"
# The command's prediction from best/ with no tokenizer or label flag: test_results.tsv under a header of names.
run run-classifier --task_name generic --data_dir cls --init_checkpoint rc/best --output_dir rc_pred --do_predict
[ "$(head -1 rc_pred/test_results.tsv)" = "$(printf 'dull\tplay')" ]
tail -n +2 cls/test.csv > new.txt
run predict --checkpoint rc/best --input new.txt --output predict_cls.jsonl
"$ex/classify" rc/best < new.txt > example_cls.tsv
python3 - <<'PY'
import json
rows = [l.rstrip("\n").split("\t") for l in open("rc_pred/test_results.tsv")]
header, probs = rows[0], [[float(x) for x in r] for r in rows[1:]]
pred = [json.loads(l) for l in open("predict_cls.jsonl")]
example = [l.rstrip("\n").split("\t") for l in open("example_cls.tsv")]
assert len(pred) == len(probs) == len(example) == 4, (len(pred), len(probs), len(example))
for p, ref, e in zip(pred, probs, example):
    want = header[max(range(len(ref)), key=lambda k: ref[k])]
    assert p["label"] == want == e[0], (p, ref, e)
    for k, name in enumerate(header):
        assert abs(p["scores"][name] - ref[k]) <= 1e-6, (p, ref)
        assert abs(float(e[1 + k]) - ref[k]) <= 1e-6, (e, ref)
    assert abs(p["score"] - max(ref)) <= 1e-6
PY
refused "contradicts the checkpoint" run-classifier --task_name generic --data_dir cls --init_checkpoint rc/best \
  --output_dir x --do_predict --do_lower_case false
refused "contradicts the checkpoint" run-classifier --task_name generic --data_dir cls --init_checkpoint rc/best \
  --output_dir x --do_predict --vocab_file "$2/data/vocab/bert-base-uncased-vocab.txt"
refused "do not match" run-classifier --task_name generic --data_dir cls --init_checkpoint rc/best \
  --output_dir x --do_predict --labels a,b
refused "contradicts the checkpoint" predict --checkpoint rc/best --input new.txt --do_lower_case false

# A Hugging Face directory: config.json, model.safetensors, vocab.txt and transformers' tokenizer_config.json, whose
# model_max_length int(1e30) means "no limit" (then the pipeline's default, min(512, max_position_embeddings)).
mkdir hf
cp rc/best/config.json rc/best/model.safetensors rc/best/vocab.txt hf/
printf '{"do_lower_case": true, "model_max_length": 1000000000000000019884624838656, "tokenizer_class": "BertTokenizer"}\n' \
  > hf/tokenizer_config.json
run predict --checkpoint hf --input new.txt --output predict_hf.jsonl
cmp predict_hf.jsonl predict_cls.jsonl
run run-classifier --task_name generic --data_dir cls --init_checkpoint hf --output_dir hf_pred --do_predict
cmp hf_pred/test_results.tsv rc_pred/test_results.tsv

# --- token classification ------------------------------------------------------------------------------------
for i in $(seq 1 6); do printf 'jack\tB-PER\nmakes\tO\na\tO\ndull\tB-MISC\nboy\tI-MISC\n\nall\tO\nwork\tO\n\n'; done > ner.conll
printf 'jack\tO\nmakes\tO\njack\tO\nplay\tO\n\ndull\tO\nboy\tO\nand\tO\njack\tO\n\na\tO\n\n' > ner_test.conll
run run-ner --train_file ner.conll --validation_file ner.conll --init_checkpoint "$ck/bert_model.ckpt" \
  --max_seq_length 8 --doc_stride 3 --train_batch_size 4 --num_train_epochs 10 --learning_rate 3e-2 \
  --warmup_proportion 0 --output_dir rn --do_train --do_eval
[ "$(json rn/best/config.json 'd["architectures"][0], d["task_specific_params"]')" = \
  "BertForTokenClassification {'token-classification': {'doc_stride': 3}}" ]
run run-ner --init_checkpoint rn/best --test_file ner_test.conll --output_dir rn_pred --do_predict
python3 - <<'PY'
sents, cur = [], []
for l in open("ner_test.conll"):
    if l.strip(): cur.append(l.split()[0])
    elif cur: sents.append(" ".join(cur)); cur = []
open("ner_new.txt", "w").write("\n".join(sents) + "\n")
PY
run predict --checkpoint rn/best --input ner_new.txt --output predict_ner.jsonl
"$ex/tag" rn/best < ner_new.txt > example_ner.txt
python3 - <<'PY'
import json
# Chunks of each sentence of the command's predictions (IOB2: B- starts, I- of the same type continues).
sents, cur = [], []
for l in open("rn_pred/test_predictions.txt"):
    if l.strip(): cur.append(l.split())
    elif cur: sents.append(cur); cur = []
want = []
for words in sents:
    chunks, start, typ, offsets, at = [], None, None, [], 0
    for w, *_ in words:
        offsets.append((at, at + len(w))); at += len(w) + 1
    tags = [w[-1] for w in words] + ["O"]
    for i, t in enumerate(tags):
        if typ is not None and not (t.startswith("I-") and t[2:] == typ):
            chunks.append((typ, offsets[start][0], offsets[i - 1][1])); typ = None
        if typ is None and t != "O":
            start, typ = i, t[2:]
    want.append(chunks)
pred = [json.loads(l) for l in open("predict_ner.jsonl")]
example = [l.rstrip("\n") for l in open("example_ner.txt")]
got = [[(e["entity_group"], e["start"], e["end"]) for e in p["entities"]] for p in pred]
ex = [[(f[0], int(f[1]), int(f[2])) for f in (x.split(" ") for x in line.split("\t") if x)] for line in example]
assert got == want == ex, (got, want, ex)
assert sum(len(c) for c in want) > 0, "the tagger found no entity: the comparison would be empty"
for p in pred:
    assert len(p["words"]) == len(p["words"]) and all(w["label"] for w in p["words"])
PY

# --- question answering --------------------------------------------------------------------------------------
cat > squad.json <<'JSON'
{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "all work and no play makes jack a dull boy",
 "qas": [{"id": "q1", "question": "what makes jack", "answers": [{"text": "all work and no play", "answer_start": 0}]},
         {"id": "q2", "question": "jack a", "answers": [{"text": "dull boy", "answer_start": 34}]}]},
 {"context": "jack  makes   a dull play and no  work", "qas": [{"id": "q3", "question": "jack makes",
  "answers": [{"text": "a dull play", "answer_start": 14}]}]}]}]}
JSON
run run-squad --train_file squad.json --predict_file squad.json --init_checkpoint "$ck/bert_model.ckpt" \
  --max_seq_length 16 --doc_stride 4 --max_query_length 4 --max_answer_length 6 --train_batch_size 2 --max_steps 4 \
  --output_dir rs --do_train --do_predict
[ "$(json rs/best/config.json 'd["architectures"][0], d["task_specific_params"]["question-answering"]["doc_stride"]')" = \
  "BertForQuestionAnswering 4" ]
run run-squad --init_checkpoint rs/best --predict_file squad.json --doc_stride 4 --max_query_length 4 \
  --max_answer_length 6 --output_dir rs_pred --do_predict
python3 - <<'PY'
import json
d = json.load(open("squad.json"))
with open("qa_new.jsonl", "w") as f, open("qa_new.tsv", "w") as t:
    for p in d["data"][0]["paragraphs"]:
        for q in p["qas"]:
            f.write(json.dumps({"id": q["id"], "question": q["question"], "context": p["context"]}) + "\n")
            t.write(q["question"] + "\t" + p["context"] + "\n")
PY
run predict --checkpoint rs/best --input qa_new.jsonl --output predict_qa.jsonl
"$ex/answer" rs/best < qa_new.tsv > example_qa.tsv
python3 - <<'PY'
import json
want = json.load(open("rs_pred/predictions.json"))
nbest = json.load(open("rs_pred/nbest_predictions.json"))
ctx = {q["id"]: p["context"] for p in json.load(open("squad.json"))["data"][0]["paragraphs"] for q in p["qas"]}
pred = [json.loads(l) for l in open("predict_qa.jsonl")]
example = [l.rstrip("\n").split("\t") for l in open("example_qa.tsv")]
assert [p["id"] for p in pred] == list(want)
for p, e in zip(pred, example):
    assert p["answer"] == want[p["id"]] == e[0], (p, want, e)
    assert abs(p["score"] - nbest[p["id"]][0]["probability"]) <= 1e-9, (p, nbest[p["id"]][0])
    assert ctx[p["id"]][p["start"]:p["end"]] == p["answer"], (p, ctx[p["id"]])
    assert (int(e[2]), int(e[3])) == (p["start"], p["end"])
PY

# --- feature extraction: the TF checkpoint directory itself (bert_config.json, vocab.txt, no casing file) -------
printf 'all work and no play\njack makes a dull boy ||| no play\n' > feat.txt
run extract-features --input_file feat.txt --init_checkpoint "$ck/bert_model.ckpt" --layers -1 --pooling mean \
  --output_file feat_ref.jsonl
run predict --checkpoint "$ck" --input feat.txt --output predict_feat.jsonl
head -1 feat.txt | "$ex/embed" "$ck" > example_feat.txt
python3 - <<'PY'
import json
ref = [json.loads(l)["values"] for l in open("feat_ref.jsonl")]
got = [json.loads(l)["values"] for l in open("predict_feat.jsonl")]
ex = [[float(x) for x in l.split()] for l in open("example_feat.txt")]
assert len(ref) == len(got) == 2 and len(ex) == 1
for r, g in zip(ref, got):
    assert len(r) == len(g) == 4 and all(abs(a - b) <= 1e-6 for a, b in zip(r, g)), (r, g)
assert all(abs(a - b) <= 1e-6 for a, b in zip(ref[0], ex[0])), (ref[0], ex[0])
PY
refused "contradicts the checkpoint" extract-features --input_file feat.txt --init_checkpoint rc/best \
  --do_lower_case false --pooling mean
echo "pipeline_predict: run-classifier, run-ner, run-squad, extract-features, predict and the examples agree"
rm -rf "$work"
