#!/usr/bin/env bash
# commit_snapshot.sh: commits the long run's snapshot (data/long-run-snapshot, 45 MB) so that the commits since BASE
# change it once, however often a session commits it. Each replacement of the snapshot counts about 91 MB of diff
# text (the old and the new bytes) against the 256 MiB a stop may submit; three such commits pass it (stop 31,
# 2026-12-02, was refused for its size). The session's earlier commits that touched only the snapshot are dropped:
# the other commits since BASE are replayed on BASE in a temporary worktree, the snapshot is committed on top from a
# copy taken while no save was running (through a temporary index), and only then is the branch moved, in one
# update-ref. Until that moment nothing of the branch, the index or the work tree has changed, so a failure or a kill
# loses nothing; the work tree is never written. scripts/submission_size.sh then prints the submission's size.
# Usage: scripts/commit_snapshot.sh "MESSAGE" [BASE]
# BASE (default: the oldest entry of the current branch's reflog, the landed main a session's clone began at) must be
# an ancestor of HEAD. Refuses (exit 2): a detached HEAD, uncommitted changes to tracked files outside the snapshot,
# an incomplete snapshot or a save in progress, a commit since BASE that mixes the snapshot with other files, merges,
# and dropping a commit that a remote-tracking branch holds (landed history is never rewritten).
set -euo pipefail
cd "$(dirname "$0")/.."
SNAP=data/long-run-snapshot
NEEDED=(SNAPSHOT.json model.bf16.safetensors exp_avg_sq.bf16.safetensors trainer_state.json config.json)
fail() { echo "commit_snapshot.sh: $*" >&2; exit 2; }
[ "$#" -ge 1 ] && [ -n "$(tr -d '[:space:]' <<<"$1")" ] || fail "usage: scripts/commit_snapshot.sh MESSAGE [BASE]"
msg=$1
branch=$(git symbolic-ref -q HEAD) || fail "HEAD is detached: check out the branch the session submits (main)"
base_arg=${2:-$(git reflog show --format=%H "$branch" 2>/dev/null | tail -1)}
[ -n "$base_arg" ] && base=$(git rev-parse -q --verify "$base_arg^{commit}") || fail "no base commit: give one as BASE"
git merge-base --is-ancestor "$base" HEAD || fail "BASE ${base:0:9} is not an ancestor of HEAD"
old_head=$(git rev-parse HEAD)

# The snapshot: complete, and no save of long_run_snapshot.py under way or killed half-way.
[ -e "$SNAP.tmp" ] && fail "$SNAP.tmp exists: a save is running (wait a minute) or was killed (remove $SNAP.tmp)"
if [ ! -f "$SNAP/SNAPSHOT.json" ]; then
  [ -f "$SNAP.old/SNAPSHOT.json" ] && fail "$SNAP is incomplete and $SNAP.old holds the last whole snapshot (a save was killed): mv $SNAP.old $SNAP"
  fail "$SNAP/SNAPSHOT.json not found"
fi
for f in "${NEEDED[@]}"; do [ -f "$SNAP/$f" ] || fail "$SNAP/$f is missing: not a whole snapshot"; done
if [ -n "$(git status --porcelain --untracked-files=no -- . ":(exclude)$SNAP")" ]; then
  git status --short --untracked-files=no -- . ":(exclude)$SNAP" >&2
  fail "commit or stash the changes above first"
fi

# The commits since BASE: keep those that do not touch the snapshot, drop those that touch only it.
[ -z "$(git rev-list --merges "$base..HEAD")" ] || fail "merges since BASE: do it by hand"
drop=() keep=()
while read -r c; do
  in=0 out=0
  while IFS= read -r -d '' f; do
    case "$f" in "$SNAP"/*) in=1 ;; *) out=1 ;; esac
  done < <(git diff-tree -r --no-renames --no-commit-id --name-only -z --root "$c")
  if [ "$in" = 0 ]; then keep+=("$c"); continue; fi
  [ "$out" = 0 ] || fail "commit ${c:0:9} changes $SNAP and other files; split it by hand"
  [ -z "$(git for-each-ref --contains "$c" refs/remotes)" ] || fail "commit ${c:0:9} is on a remote branch: not rewriting it"
  drop+=("$c")
done < <(git rev-list --reverse "$base..HEAD")

tmp=$(mktemp -d)
wt=""
cleanup() { [ -z "$wt" ] || git worktree remove --force "$wt" 2>/dev/null || true; rm -rf "$tmp"; git worktree prune; }
trap cleanup EXIT
new=$old_head
if [ "${#drop[@]}" -gt 0 ]; then
  echo "commit_snapshot.sh: dropping ${#drop[@]} earlier snapshot commit(s): ${drop[*]}"
  wt=$tmp/worktree
  git worktree add -q --detach "$wt" "$base"
  if [ "${#keep[@]}" -gt 0 ]; then
    git -C "$wt" cherry-pick --allow-empty "${keep[@]}" > /dev/null || fail "replaying the other commits on BASE failed; nothing changed"
  fi
  new=$(git -C "$wt" rev-parse HEAD)
  git diff --quiet "$old_head" "$new" -- . ":(exclude)$SNAP" || fail "the replayed commits differ from HEAD outside $SNAP; nothing changed"
fi

# A copy of the snapshot taken while no save ran (the same SNAPSHOT.json before and after, no .tmp), committed
# through a temporary index whose work tree is the copy.
before=$(cat "$SNAP/SNAPSHOT.json")
mkdir -p "$tmp/root/$(dirname "$SNAP")"
cp -a "$SNAP" "$tmp/root/$SNAP"
[ ! -e "$SNAP.tmp" ] && [ "$(cat "$SNAP/SNAPSHOT.json" 2>/dev/null)" = "$before" ] ||
  fail "a save ran while the snapshot was copied: run it again"
export GIT_INDEX_FILE=$tmp/index
git read-tree "$new"
git --work-tree="$tmp/root" add -A -- "$SNAP"
tree=$(git write-tree)
unset GIT_INDEX_FILE
for f in "${NEEDED[@]}"; do git cat-file -e "$tree:$SNAP/$f" || fail "the tree lacks $SNAP/$f; nothing changed"; done
if [ "$tree" = "$(git rev-parse "$old_head^{tree}")" ]; then
  echo "commit_snapshot.sh: the snapshot is unchanged since its last commit: nothing to do"
  scripts/submission_size.sh "$base"
  exit 0
elif [ "$tree" = "$(git rev-parse "$new^{tree}")" ]; then
  final=$new
  echo "commit_snapshot.sh: the snapshot is unchanged since its last commit"
else
  final=$(git commit-tree "$tree" -p "$new" -m "$msg")
fi
git update-ref -m "commit_snapshot.sh: $msg" "$branch" "$final" "$old_head"
git reset -q  # the index follows the branch; the work tree already holds what was committed (or a newer save)
[ "$final" = "$new" ] || echo "commit_snapshot.sh: committed $(git rev-parse --short "$final")"
scripts/submission_size.sh "$base"
