#!/usr/bin/env bash
# submission_size.sh: how big the commits since BASE are, measured as this workplace measures a submission: the
# diffs of every commit, added up as text (a binary file counts with its bytes, and a replaced one twice: old and
# new), against 256 MiB; and the commits packed as git sends them, against 512 MiB. A stop over either limit is
# refused whole (stop 31, 2026-12-02, was refused for its size; the long run's snapshot, about 91 MB of diff text
# a replacement, is the likely cause).
# Usage: scripts/submission_size.sh [BASE]   BASE defaults to the commit this clone's main started at (the oldest
# entry of its reflog: the landed main a session is given). Exit 1 when a limit is passed, 2 on bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-$(git reflog show --format=%H main 2>/dev/null | tail -1)}
[ -n "$base" ] && git rev-parse -q --verify "$base^{commit}" > /dev/null ||
  { echo "submission_size.sh: no base commit (give one: scripts/submission_size.sh BASE)" >&2; exit 2; }
diff_limit=$((256 * 1024 * 1024)) pack_limit=$((512 * 1024 * 1024))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
total=0 n=0
while read -r c; do
  b=$(git show --text --no-color --no-ext-diff --format= "$c" | wc -c)
  total=$((total + b)) n=$((n + 1))
  [ "$b" -ge $((1024 * 1024)) ] && printf '  %s %7.1f MiB  %s\n' "${c:0:9}" "$(mib "$b")" \
    "$(git log -1 --format=%s "$c" | cut -c1-80)"
done < <(git rev-list --reverse "$base..HEAD")
pack=$(git rev-list --objects "$base..HEAD" | git pack-objects --stdout -q 2> /dev/null | wc -c)
echo "submission_size.sh: $n commits since ${base:0:9}: diffs $(mib "$total") MiB of 256, packed $(mib "$pack") MiB of 512"
[ "$total" -lt "$diff_limit" ] && [ "$pack" -lt "$pack_limit" ] || { echo "submission_size.sh: over a limit" >&2; exit 1; }
