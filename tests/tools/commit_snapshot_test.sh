#!/usr/bin/env bash
# commit_snapshot_test.sh SOURCE_DIR: scripts/commit_snapshot.sh and scripts/submission_size.sh in a scratch repository
# cloned as a session's is:
# - however often the snapshot is committed, the commits since BASE change it once; the other commits stay, in their
#   order and with their contents; the work tree keeps the newest snapshot and is never written;
# - every refusal (exit 2) leaves branch, index and work tree as they were: a blank message, a detached HEAD, a BASE
#   that is not an ancestor, uncommitted changes outside the snapshot, an incomplete snapshot, a save under way
#   (.tmp), a commit mixing the snapshot with other files (a rename out of it included), a snapshot commit that a
#   remote-tracking branch holds;
# - submission_size.sh counts a replaced binary file twice (old and new bytes) and exits 1 over 256 MiB of diffs.
set -euo pipefail
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
S=data/long-run-snapshot
fail() { echo "FAIL: $*" >&2; exit 1; }
snap() {  # snap STEP: a whole (small) snapshot at that step
  mkdir -p $S
  echo "{\"global_step\": $1}" > $S/SNAPSHOT.json
  for f in model.bf16.safetensors exp_avg_sq.bf16.safetensors; do head -c 100000 /dev/urandom > $S/$f; done
  echo "{\"global_step\": $1}" > $S/trainer_state.json && echo '{}' > $S/config.json && echo vocab > $S/vocab.txt
}
git init -q -b main "$t/origin" && cd "$t/origin"
git config user.email t@example.invalid && git config user.name t
mkdir -p scripts && cp "$src/scripts/commit_snapshot.sh" "$src/scripts/submission_size.sh" scripts/
snap 1 && echo a > code.txt && git add -A && git commit -qm landed
git clone -q "$t/origin" "$t/r" && cd "$t/r"
git config user.email t@example.invalid && git config user.name t
base=$(git rev-parse HEAD)
state() { echo "$(git rev-parse HEAD) $(git status --porcelain | md5sum) $(cat $S/*.json | md5sum)"; }
refused() {  # refused WHAT PATTERN ARGS...: exit 2, the message, and nothing changed
  local what=$1 pat=$2 rc=0 s; shift 2
  s=$(state)
  scripts/commit_snapshot.sh "$@" > /dev/null 2> "$t/err" || rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, not 2"
  grep -q -- "$pat" "$t/err" || fail "$what: message $(cat "$t/err")"
  [ "$(state)" = "$s" ] || fail "$what: the refusal changed branch, index or work tree"
}

# Three commits of the snapshot between code commits, the default BASE (the clone's start): one change of it.
snap 2 && scripts/commit_snapshot.sh "snap 2" > /dev/null
echo b >> code.txt && git commit -qam "code b"
snap 3 && scripts/commit_snapshot.sh "snap 3" > /dev/null
echo c >> code.txt && git commit -qam "code c"
snap 4 && want=$(cat $S/* | md5sum)
scripts/commit_snapshot.sh "snap 4" > /dev/null
subjects=$(git log --format=%s "$base..HEAD" | tr '\n' ,)
[ "$subjects" = "snap 4,code c,code b," ] || fail "history since base: $subjects"
[ "$(git rev-list "$base..HEAD" -- $S | wc -l)" = 1 ] || fail "the snapshot changes more than once"
[ "$(git show HEAD:code.txt | tr -d '\n')" = abc ] || fail "code.txt lost a commit"
[ "$(cat $S/* | md5sum)" = "$want" ] || fail "the work tree lost the newest snapshot"
[ "$(git show HEAD:$S/SNAPSHOT.json)" = '{"global_step": 4}' ] || fail "HEAD's snapshot is not the newest"
[ -z "$(git status --porcelain)" ] || fail "work tree not clean after the commit"
[ -z "$(git worktree list | sed 1d)" ] || fail "a temporary worktree was left"
scripts/commit_snapshot.sh "snap 4 again" > "$t/out"
grep -q "unchanged" "$t/out" && [ "$(git log -1 --format=%s)" = "snap 4" ] || fail "an unchanged snapshot made a commit"

# Refusals.
snap 5
refused "blank message" "usage" "  "
refused "BASE not an ancestor" "not an ancestor" "snap 5" "$(git commit-tree -m side "$(git rev-parse HEAD^{tree})")"
git checkout -q --detach
refused "detached HEAD" "detached" "snap 5"
git checkout -q main
echo d >> code.txt
refused "uncommitted change" "commit or stash" "snap 5"
git checkout -q code.txt
mkdir $S.tmp
refused "save under way" "a save is running" "snap 5"
rmdir $S.tmp
mv $S/exp_avg_sq.bf16.safetensors "$t/e"
refused "incomplete snapshot" "exp_avg_sq.bf16.safetensors is missing" "snap 5"
mv "$t/e" $S/exp_avg_sq.bf16.safetensors
echo untracked > notes.txt                          # untracked files elsewhere are no obstacle
scripts/commit_snapshot.sh "snap 5" > /dev/null && rm notes.txt
echo e >> code.txt && echo x > $S/extra.txt && git add -A && git commit -qm mixed
snap 6
refused "mixed commit" "changes $S and other files" "snap 6"
git reset -q --hard HEAD~1 && rm -f $S/extra.txt
git mv $S/vocab.txt data/vocab.txt && git commit -qm "rename out"   # (rename detection would list data/ alone)
refused "rename out of the snapshot" "changes $S and other files" "snap 6"
git reset -q --hard HEAD~1
# A snapshot commit that landed (on a remote-tracking branch) is never dropped.
git -C "$t/origin" pull -q "$t/r" main && git fetch -q origin
snap 7
refused "landed snapshot commit" "on a remote branch" "snap 7"

# submission_size.sh: a 100,000-byte binary replaced by another counts both (about 200,000 bytes of diff text).
git reset -q --hard "$base" && snap 8 && git add -A && git commit -qm "snap 8"
line=$(scripts/submission_size.sh "$base")
bytes=$(git show --text --format= HEAD | wc -c)
[ "$bytes" -gt 390000 ] || fail "two replaced binaries counted $bytes bytes"
grep -q "1 commits since ${base:0:9}: diffs 0.4 MiB of 256" <<<"$line" || fail "submission_size: $line"
# Over the limit: 130 MiB replaced by 130 MiB of other bytes is 260 MiB of diff text.
head -c $((130 * 1024 * 1024)) /dev/zero | tr '\0' 'a' > big.txt && git add big.txt && git commit -qm big1
base2=$(git rev-parse HEAD)
head -c $((130 * 1024 * 1024)) /dev/zero | tr '\0' 'b' > big.txt && git commit -qam big2
rc=0; scripts/submission_size.sh "$base2" > /dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "260 MiB of diffs passed (rc $rc)"
echo "commit_snapshot_test: ok"
