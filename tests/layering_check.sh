#!/usr/bin/env bash
# layering_check.sh ROOT: fails when a file of a lower layer includes a header of a higher (or sideways)
# layer (DESIGN.md section 1), or a public header includes an implementation library.
set -euo pipefail
root=$1
allowed() {
  case "$1" in
    core) echo "" ;;
    autograd) echo "core" ;;
    ops) echo "core autograd" ;;
    nn) echo "core autograd ops" ;;
    models) echo "core autograd ops nn" ;;
    optim) echo "core autograd ops nn" ;;
    schedule) echo "core" ;;
    data) echo "core" ;;
    io) echo "core autograd ops nn models optim schedule data" ;;
    train) echo "core autograd ops nn models optim schedule data io" ;;
    *) echo "ANY" ;;
  esac
}
bad=0
while IFS= read -r line; do
  file=${line%%:*}
  inc=$(sed -n 's/.*#include *[<"]bertrain\/\([a-z_]*\)\/.*/\1/p' <<<"$line")
  lay=$(sed -n 's#.*\(include/bertrain\|src\)/\([a-z_]*\)/.*#\2#p' <<<"$file")
  [ -n "$inc" ] && [ -n "$lay" ] && [ "$inc" != "$lay" ] || continue
  ok=$(allowed "$lay")
  [ "$ok" = "ANY" ] && continue
  case " $ok " in
    *" $inc "*) ;;
    *) echo "layering: $file (layer $lay) includes bertrain/$inc/" >&2; bad=1 ;;
  esac
done < <(grep -rn '#include *[<"]bertrain/' "$root/include/bertrain" "$root/src" 2>/dev/null || true)
if grep -rnE '#include *[<"](Eigen/|oneapi/dnnl|dnnl\.h|spdlog/|CLI/|sentencepiece|hdf5\.h|utf8proc\.h|mpi\.h)' "$root/include" >&2; then
  echo "layering: public headers include implementation libraries" >&2
  bad=1
fi
exit $bad
