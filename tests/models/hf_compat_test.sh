#!/usr/bin/env bash
# hf_compat_test.sh ROUNDTRIP_EXE SOURCE_DIR: transformers-convention checkpoints written by tests/models/hf_compat.py
# are loaded by bertrain and saved again, and the result is checked by the same script (names, dtypes, shapes,
# {"format": "pt"} metadata, bit-equal values).
set -euo pipefail
exe=$1
src=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
/usr/bin/python3 "$src/tests/models/hf_compat.py" write "$t"
"$exe" "$t/hf_new" "$t/hf_old" "$t/bertrain"
/usr/bin/python3 "$src/tests/models/hf_compat.py" check "$t/bertrain" "$t/hf_new"
# The checker must be able to fail: a checkpoint with a renamed tensor is rejected.
cp -r "$t/bertrain" "$t/broken"
/usr/bin/python3 - "$t/broken/model.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.find(b"bert.pooler.dense.bias")
b[i:i + 4] = b"BERT"
open(p, "wb").write(bytes(b))
PY
if /usr/bin/python3 "$src/tests/models/hf_compat.py" check "$t/broken" "$t/hf_new" 2>/dev/null; then
  echo "hf_compat_test: the checker accepted a broken checkpoint" >&2
  exit 1
fi
echo "hf_compat_test: OK"
