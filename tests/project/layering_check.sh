#!/usr/bin/env bash
# layering_check.sh ROOT: the layer rules of README "Layout".
#  1. A file of a layer includes headers only of the layers below it (never above or sideways).
#  2. Each layer's CMake target (src/<layer>/layer.cmake) declares exactly the layers its files include:
#     PUBLIC_DEPS = the layers its public headers include, PRIVATE_DEPS = the others its sources include.
#  3. Public headers include no implementation library (Eigen, oneDNN, spdlog, CLI11, sentencepiece, HDF5,
#     utf8proc, MPI, nlohmann/json, LevelDB, protobuf), and tools/ includes only public headers.
set -euo pipefail
root=$1
layers="core autograd ops nn models optim schedule text data io train tasks"
allowed() {
  case "$1" in
    core) echo "" ;;
    autograd) echo "core" ;;
    ops) echo "core autograd" ;;
    nn) echo "core autograd ops" ;;
    models) echo "core autograd ops nn" ;;
    optim) echo "core autograd ops nn" ;;
    schedule) echo "core" ;;
    text) echo "core" ;;
    data) echo "core text" ;;
    io) echo "core autograd ops nn models optim schedule text data" ;;
    train) echo "core autograd ops nn models optim schedule text data io" ;;
    tasks) echo "core autograd ops nn models optim schedule text data io train" ;;
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

# included layers of a set of paths, sorted, without the layer itself
included() {
  local self=$1; shift
  { grep -rhoE '#include *"bertrain/[a-z_]+/' "$@" 2>/dev/null || true; } | sed -E 's/.*bertrain\/([a-z_]+)\//\1/' |
    { grep -vx "$self" || true; } | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# bertrain:: targets listed after KEYWORD in a layer.cmake (up to the next keyword or closing parenthesis)
declared() {
  awk -v kw="$2" '
    /^ *#/ { next }
    { for (i = 1; i <= NF; i++) {
        t = $i; gsub(/[()]/, "", t)
        if (t == "PUBLIC_DEPS" || t == "PRIVATE_DEPS" || t == "SOURCES") mode = t
        else if (mode == kw && t ~ /^bertrain::/) { sub(/^bertrain::/, "", t); print t }
        if ($i ~ /\)$/) mode = ""
      } }' "$1" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
for L in $layers; do
  cm="$root/src/$L/layer.cmake"
  [ -f "$cm" ] || continue
  paths=(); [ -d "$root/include/bertrain/$L" ] && paths+=("$root/include/bertrain/$L")
  pub=""; [ ${#paths[@]} -gt 0 ] && pub=$(included "$L" "${paths[@]}")
  all=$(included "$L" "$root/src/$L" "${paths[@]}")
  priv=$(comm -23 <(tr ' ' '\n' <<<"$all" | sed '/^$/d') <(tr ' ' '\n' <<<"$pub" | sed '/^$/d') | tr '\n' ' ' | sed 's/ $//' || true)
  dpub=$(declared "$cm" PUBLIC_DEPS)
  dpriv=$(declared "$cm" PRIVATE_DEPS)
  if [ "$pub" != "$dpub" ]; then
    echo "layering: $cm declares PUBLIC_DEPS [$dpub] but the public headers of $L include [$pub]" >&2; bad=1
  fi
  if [ "$priv" != "$dpriv" ]; then
    echo "layering: $cm declares PRIVATE_DEPS layers [$dpriv] but the sources of $L include [$priv] beyond its public headers" >&2; bad=1
  fi
done

if grep -rnE '#include *[<"](Eigen/|oneapi/dnnl|dnnl\.h|spdlog/|CLI/|sentencepiece|hdf5\.h|H5|utf8proc\.h|mpi\.h|nlohmann/|leveldb/|google/protobuf|snappy)' "$root/include" >&2; then
  echo "layering: public headers include implementation libraries" >&2
  bad=1
fi
if [ -d "$root/tools" ] && grep -rnE '#include *"(kernels|core|autograd|ops|nn|models|optim|schedule|text|data|io|train|tasks)/' "$root/tools" >&2; then
  echo "layering: tools/ includes private headers (only bertrain/... public headers are allowed)" >&2
  bad=1
fi
# 4. The umbrella header include/bertrain/bertrain.h includes every public header.
if [ -f "$root/include/bertrain/bertrain.h" ]; then
  while IFS= read -r h; do
    grep -q "#include \"$h\"" "$root/include/bertrain/bertrain.h" ||
      { echo "layering: include/bertrain/bertrain.h does not include $h" >&2; bad=1; }
  done < <(cd "$root/include" && find bertrain -mindepth 2 -name '*.h' | sort)
fi
exit $bad
