#!/usr/bin/env bash
# golden_reproducible.sh SOURCE_DIR: re-running tests/models/gen_golden.py reproduces the committed files under
# tests/fixtures/golden byte for byte.
set -euo pipefail
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
/usr/bin/python3 "$src/tests/models/gen_golden.py" --out "$t" >/dev/null
n=0
for f in "$src"/tests/fixtures/golden/*; do
  cmp "$f" "$t/$(basename "$f")"
  n=$((n + 1))
done
[ "$n" -eq "$(ls "$t" | wc -l)" ] || { echo "golden_reproducible: file sets differ" >&2; exit 1; }
[ "$n" -ge 7 ] || { echo "golden_reproducible: expected at least 7 golden files, found $n" >&2; exit 1; }
echo "golden_reproducible: $n files identical"
