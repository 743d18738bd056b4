# p32_prelude.sh: sourced by the tests/tools scripts called as SCRIPT BUILD_DIR SOURCE_DIR that run on the trainer
# fixture's shards (ctest fixture trainer_shards): strict mode, build and src, a temporary directory t removed on
# exit, and data = the fixture's T=32 shards.
set -euo pipefail
build=$1
src=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
data="$build/trainer_test/data/p32"
