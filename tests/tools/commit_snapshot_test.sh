#!/usr/bin/env bash
# commit_snapshot_test.sh SOURCE_DIR: scripts/commit_snapshot.sh and scripts/submission_size.sh in a scratch clone-like
# repository: however often the snapshot is committed, the commits since BASE change it once, the other commits stay
# (in their order, with their contents), the work tree keeps the newest snapshot, and it refuses (exit 2) uncommitted
# changes and a commit that mixes the snapshot with other files. submission_size.sh counts a replaced binary file
# twice (old and new bytes) and exits 1 over 256 MiB of diffs.
set -euo pipefail
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cd "$t"
git init -q -b main r && cd r
git config user.email t@example.invalid && git config user.name t
mkdir -p scripts data/long-run-snapshot
cp "$src/scripts/commit_snapshot.sh" "$src/scripts/submission_size.sh" scripts/
snap() { echo "{\"global_step\": $1}" > data/long-run-snapshot/SNAPSHOT.json
         head -c 200000 /dev/urandom > data/long-run-snapshot/model.bf16.safetensors; }
snap 1 && echo a > code.txt && git add -A && git commit -qm base
base=$(git rev-parse HEAD)
fail() { echo "FAIL: $*" >&2; exit 1; }
snap 2 && scripts/commit_snapshot.sh "snap 2" "$base" > /dev/null
echo b >> code.txt && git commit -qam "code b"
snap 3 && scripts/commit_snapshot.sh "snap 3" "$base" > /dev/null
echo c >> code.txt && git commit -qam "code c"
snap 4 && want=$(md5sum < data/long-run-snapshot/model.bf16.safetensors)
scripts/commit_snapshot.sh "snap 4" "$base" > /dev/null
subjects=$(git log --format=%s "$base..HEAD" | tr '\n' ,)
[ "$subjects" = "snap 4,code c,code b," ] || fail "history since base: $subjects"
[ "$(git rev-list "$base..HEAD" -- data/long-run-snapshot | wc -l)" = 1 ] || fail "the snapshot changes more than once"
[ "$(git show HEAD:code.txt | tr -d '\n')" = abc ] || fail "code.txt lost a commit"
[ "$(md5sum < data/long-run-snapshot/model.bf16.safetensors)" = "$want" ] || fail "the work tree lost the newest snapshot"
[ "$(git show HEAD:data/long-run-snapshot/SNAPSHOT.json)" = '{"global_step": 4}' ] || fail "HEAD's snapshot is not the newest"
[ -z "$(git status --porcelain)" ] || fail "work tree not clean after the commit"
# Refusals: another uncommitted change; a commit that mixes the snapshot with other files.
snap 5 && echo d >> code.txt
rc=0; scripts/commit_snapshot.sh "snap 5" "$base" 2> "$t/err.txt" > /dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "commit or stash" "$t/err.txt" || fail "uncommitted change: rc $rc"
git add -A && git commit -qm mixed
snap 6
rc=0; scripts/commit_snapshot.sh "snap 6" "$base" 2> "$t/err.txt" > /dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "changes data/long-run-snapshot and other files" "$t/err.txt" || fail "mixed commit: rc $rc"
git checkout -q -- data/long-run-snapshot
# submission_size.sh: a 200,000-byte binary replaced by another counts both (about 400,000 bytes of diff text).
git reset -q --hard "$base" && snap 7 && git add -A && git commit -qm "snap 7"
line=$(scripts/submission_size.sh "$base")
bytes=$(git show --text --format= HEAD | wc -c)
[ "$bytes" -gt 390000 ] || fail "a replaced binary counted $bytes bytes"
grep -q "1 commits since ${base:0:9}: diffs 0.4 MiB of 256" <<<"$line" || fail "submission_size: $line"
# Over the limit: 130 MiB replaced by 130 MiB of other bytes is 260 MiB of diff text.
head -c $((130 * 1024 * 1024)) /dev/zero | tr '\0' 'a' > big.txt && git add big.txt && git commit -qm big1
base2=$(git rev-parse HEAD)
head -c $((130 * 1024 * 1024)) /dev/zero | tr '\0' 'b' > big.txt && git commit -qam big2
rc=0; scripts/submission_size.sh "$base2" > /dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "260 MiB of diffs passed (rc $rc)"
echo "commit_snapshot_test: ok"
