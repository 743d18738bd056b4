#!/usr/bin/env bash
# test_docs.sh: runs the documentation. Every fenced block with info string `sh` in README.md and docs/guides/*.md
# is a test: the blocks of one file run in order, each in its own `bash -eu` (as a user types them: a pipe such as
# `... | head` is not an error), in one fresh scratch
# directory that looks like the repository root (symlinks to data/, configs/, scripts/, tests/, ... and
# build/bertrain; outputs such as out/ land in the scratch directory, never in the repository), with the build
# directory on PATH. A block preceded by the line `<!-- docs-test: skip REASON -->` is skipped and the reason printed.
# Also checked, for every Markdown file in README.md and docs/: relative links point at files that exist.
#
# Usage: scripts/test_docs.sh [FILE.md ...]        (default: README.md docs/guides/*.md)
# Environment:
#   BUILD_DIR         the build directory holding bertrain (default: build)
#   DOCS_TEST_KEEP=1  keep the scratch directories (their paths are printed)
#   DOCS_TEST_TIMEOUT seconds one block may take (default 900)
#   DOCS_TEST_LIST=1  only list the blocks (file:line, run or skip) without running anything
# Exit code 0 when every run block passed and every link resolves, 1 otherwise. A failure names the file and the
# line of the block's opening fence and prints the end of the block's output.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
build_dir=${BUILD_DIR:-build}
case $build_dir in /*) ;; *) build_dir=$repo/$build_dir ;; esac
timeout_s=${DOCS_TEST_TIMEOUT:-900}
if [ "$#" -eq 0 ]; then
  set -- README.md docs/guides/*.md
fi
if [ "${DOCS_TEST_LIST:-0}" != 1 ] && [ ! -x "$build_dir/bertrain" ]; then
  echo "test_docs.sh: $build_dir/bertrain not found: build it first (cmake --build build --target bertrain)" >&2
  exit 1
fi

t0=$(date +%s)
ran=0 skipped=0 failed=0 failures=()

# Extracts the blocks of a Markdown file into DIR/NNN.sh (runnable) or DIR/NNN.skip, with DIR/NNN.line holding
# the opening fence's line number and DIR/NNN.reason the skip reason.
extract_blocks() {
  awk -v dir="$2" '
    BEGIN { n = 0; inblock = 0; skip = ""; }
    {
      if (!inblock) {
        if ($0 ~ /^<!-- docs-test: skip /) {
          skip = $0; sub(/^<!-- docs-test: skip /, "", skip); sub(/ *-->[ \t]*$/, "", skip); pending = 1; next
        }
        if ($0 ~ /^```/) {
          info = $0; sub(/^```+/, "", info); gsub(/[ \t]/, "", info)
          inblock = 1; fence = $0; sub(/[^`].*$/, "", fence)
          runnable = (info == "sh")
          if (runnable) {
            n++; f = sprintf("%s/%03d", dir, n)
            print NR > (f ".line")
            if (pending) { print skip > (f ".reason"); kind = ".skip" } else kind = ".sh"
            out = f kind
            printf "" > out
          }
          pending = 0; skip = ""
          next
        }
        if ($0 !~ /^[ \t]*$/) { pending = 0; skip = "" }
      } else {
        if (index($0, fence) == 1 && $0 ~ /^`+[ \t]*$/) { inblock = 0; if (runnable) close(out); next }
        if (runnable) print $0 > out
      }
    }' "$1"
}

make_scratch() {
  local s
  s=$(mktemp -d "${TMPDIR:-/tmp}/bertrain-docs.XXXXXX")
  # The repository root as seen by the blocks: every top-level entry but the build directories, read through
  # symlinks (.deps/ too: ONNX Runtime for node); build/ is the build directory under test.
  for e in "$repo"/* "$repo"/.ci "$repo"/.deps; do
    [ -e "$e" ] || continue
    case $(basename "$e") in build*|out) continue ;; esac
    ln -s "$e" "$s/$(basename "$e")"
  done
  # build/ holds only the binary (a link), so that a block cannot write into the real build directory.
  mkdir "$s/build"
  ln -s "$build_dir/bertrain" "$s/build/bertrain"
  echo "$s"
}

for md in "$@"; do
  if [ ! -f "$md" ]; then echo "test_docs.sh: no such file: $md" >&2; failed=$((failed + 1)); failures+=("$md: missing"); continue; fi
  blocks=$(mktemp -d)
  extract_blocks "$md" "$blocks"
  nblocks=$(ls "$blocks" | grep -c '\.line$' || true)
  if [ "${DOCS_TEST_LIST:-0}" = 1 ]; then
    for l in "$blocks"/*.line; do
      [ -e "$l" ] || continue
      b=${l%.line}
      if [ -f "$b.skip" ]; then echo "$md:$(cat "$l"): skip ($(cat "$b.reason"))"; else echo "$md:$(cat "$l"): run"; fi
    done
    rm -rf "$blocks"
    continue
  fi
  echo "== $md: $nblocks sh blocks"
  scratch=""
  file_failed=0
  for l in "$blocks"/*.line; do
    [ -e "$l" ] || continue
    b=${l%.line}
    line=$(cat "$l")
    if [ -f "$b.skip" ]; then
      echo "   skip $md:$line: $(cat "$b.reason")"
      skipped=$((skipped + 1))
      continue
    fi
    if [ "$file_failed" = 1 ]; then
      echo "   not run $md:$line (an earlier block of this file failed)"
      continue
    fi
    [ -n "$scratch" ] || scratch=$(make_scratch)
    bs=$(date +%s)
    log="$blocks/$(basename "$b").log"
    (cd "$scratch" && PATH="$build_dir:$PATH" OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
       timeout "$timeout_s" bash -eu "$b.sh") > "$log" 2>&1
    rc=$?
    ran=$((ran + 1))
    if [ "$rc" -ne 0 ]; then
      failed=$((failed + 1)); file_failed=1
      [ "$rc" -eq 124 ] && why="timed out after $timeout_s s" || why="exit code $rc"
      failures+=("$md:$line: $why")
      echo "   FAIL $md:$line ($why, $(( $(date +%s) - bs )) s); the block:"
      sed 's/^/     | /' "$b.sh"
      echo "   its output (last 25 lines):"
      tail -n 25 "$log" | sed 's/^/     > /'
    else
      echo "   ok   $md:$line ($(( $(date +%s) - bs )) s)"
    fi
  done
  if [ -n "$scratch" ]; then
    if [ "${DOCS_TEST_KEEP:-0}" = 1 ]; then echo "   scratch kept: $scratch"; else rm -rf "$scratch"; fi
  fi
  rm -rf "$blocks"
done
[ "${DOCS_TEST_LIST:-0}" = 1 ] && exit 0

# Relative links of every Markdown file of the manual and the front page must resolve.
broken=0
while IFS= read -r md; do
  dir=$(dirname "$md")
  while IFS= read -r target; do
    t=${target%%#*}
    [ -n "$t" ] || continue
    case $t in http://*|https://*|mailto:*) continue ;; esac
    if [ ! -e "$dir/$t" ]; then
      echo "   broken link in $md: $target" >&2
      broken=$((broken + 1))
    fi
  done < <(grep -oE '\]\([^)[:space:]]+\)' "$md" | sed -E 's/^\]\((.*)\)$/\1/')
done < <(ls README.md; find docs -name '*.md' | sort)
if [ "$broken" -gt 0 ]; then failed=$((failed + 1)); failures+=("$broken broken relative link(s)"); fi

echo "test_docs.sh: $ran blocks run, $skipped skipped, $failed failed, $(( $(date +%s) - t0 )) s"
if [ "$failed" -gt 0 ]; then
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
