#!/usr/bin/env bash
# train_parity_regen.sh BUILD_DIR SOURCE_DIR: re-running tests/train/gen_train_parity.py (vocabulary, shards made by
# this build's create-pretraining-data, initial weights, recipes, PyTorch reference losses) reproduces the
# committed tests/fixtures/train_parity byte for byte. Exit 77 (skipped) where Debian's python3 lacks torch or h5py.
set -euo pipefail
build=$1
src=$2
/usr/bin/python3 -c 'import torch, h5py, numpy' 2> /dev/null || { echo "SKIP: /usr/bin/python3 lacks torch/h5py"; exit 77; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
/usr/bin/python3 "$src/tests/train/gen_train_parity.py" --bertrain "$build/bertrain" --out "$t"
committed=$(cd "$src/tests/fixtures/train_parity" && find . -type f ! -name SOURCE.md | sort)
made=$(cd "$t" && find . -type f | sort)
[ "$committed" = "$made" ] || { echo "file sets differ:"; diff <(echo "$committed") <(echo "$made"); exit 1; }
for f in $committed; do
  cmp "$src/tests/fixtures/train_parity/$f" "$t/$f"
done
echo "train_parity_regen: $(wc -w <<<"$committed") files identical"
