#!/usr/bin/env bash
# cli_reference_test.sh BUILD_DIR SOURCE_DIR: docs/reference/cli.md must be what scripts/gen_cli_reference.sh
# writes from the binary's --help texts, so the flag reference never drifts from the command.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$src/scripts/gen_cli_reference.sh" "$build" > "$tmp"
if ! diff -u "$src/docs/reference/cli.md" "$tmp"; then
  echo "docs/reference/cli.md differs from 'bertrain <command> --help' (diff above: - committed, + binary)." >&2
  echo "Regenerate it from the repository root: scripts/gen_cli_reference.sh build > docs/reference/cli.md" >&2
  exit 1
fi
echo "docs/reference/cli.md matches bertrain --help"
