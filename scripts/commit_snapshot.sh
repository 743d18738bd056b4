#!/usr/bin/env bash
# commit_snapshot.sh: commits the long run's snapshot (data/long-run-snapshot, 45 MB) so that the commits since BASE
# change it once, however often a session commits it. Each replacement of the snapshot counts about 91 MB of diff
# text (the old and the new bytes) against the 256 MiB a stop may submit; three such commits pass it (stop 31,
# 2026-12-02, was refused for its size). An earlier commit since BASE that touched only the snapshot is dropped from
# the history (reset to BASE, the other commits replayed; the work tree keeps the newest snapshot), then the snapshot
# is committed anew, and scripts/submission_size.sh checks the result. Commit in the middle of a session as often as you like with it.
# Usage: scripts/commit_snapshot.sh "MESSAGE" [BASE]   (BASE as in submission_size.sh: where this clone's main began)
# Refuses (exit 2) with other uncommitted changes, or when a commit since BASE mixes the snapshot with other files.
set -euo pipefail
cd "$(dirname "$0")/.."
SNAP=data/long-run-snapshot
[ "$#" -ge 1 ] && [ -n "$1" ] || { echo "usage: scripts/commit_snapshot.sh MESSAGE [BASE]" >&2; exit 2; }
msg=$1
base=${2:-$(git reflog show --format=%H main 2>/dev/null | tail -1)}
git rev-parse -q --verify "$base^{commit}" > /dev/null || { echo "commit_snapshot.sh: no base commit" >&2; exit 2; }
[ -f "$SNAP/SNAPSHOT.json" ] || { echo "commit_snapshot.sh: $SNAP/SNAPSHOT.json not found" >&2; exit 2; }
if [ -n "$(git status --porcelain -- . ":(exclude)$SNAP")" ]; then
  echo "commit_snapshot.sh: commit or stash the other changes first:" >&2
  git status --short -- . ":(exclude)$SNAP" >&2
  exit 2
fi
# Earlier snapshot commits since BASE: each must touch the snapshot alone.
drop=() keep_commits=()
while read -r c; do
  files=$(git show --format= --name-only "$c")
  if ! grep -q "^$SNAP/" <<<"$files"; then keep_commits+=("$c"); continue; fi
  if grep -qv "^$SNAP/" <<<"$files"; then
    echo "commit_snapshot.sh: commit ${c:0:9} changes $SNAP and other files; split it by hand" >&2
    exit 2
  fi
  drop+=("$c")
done < <(git rev-list --reverse --no-merges "$base..HEAD")
[ -z "$(git rev-list --merges "$base..HEAD")" ] || { echo "commit_snapshot.sh: merges since BASE; do it by hand" >&2; exit 2; }
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
cp -a "$SNAP/." "$keep/"
if [ "${#drop[@]}" -gt 0 ]; then
  # The history again without them: BASE, then the other commits in their order (none touches the snapshot).
  echo "commit_snapshot.sh: dropping ${#drop[@]} earlier snapshot commit(s): ${drop[*]}"
  old_head=$(git rev-parse HEAD)
  git reset -q --hard "$base"
  if [ "${#keep_commits[@]}" -gt 0 ] && ! git cherry-pick --allow-empty "${keep_commits[@]}" > /dev/null; then
    git cherry-pick --abort || true
    git reset -q --hard "$old_head"
    echo "commit_snapshot.sh: replaying the commits failed; the branch is back at ${old_head:0:9}" >&2
    rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -a "$keep/." "$SNAP/"
    exit 2
  fi
fi
rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -a "$keep/." "$SNAP/"
git add -A -- "$SNAP"
if git diff --cached --quiet; then
  echo "commit_snapshot.sh: the snapshot is unchanged since the last commit"
else
  git commit -q -m "$msg" -- "$SNAP"
  echo "commit_snapshot.sh: committed $(git rev-parse --short HEAD)"
fi
scripts/submission_size.sh "$base"
