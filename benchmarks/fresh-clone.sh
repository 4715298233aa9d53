#!/usr/bin/env bash
# Times `make test` or `make lab` from a fresh clone of this repository's HEAD, set-up (downloads, environments)
# included: benchmarks/fresh-clone.sh test|lab. Prints figures, asserts nothing; leaves nothing behind (the clone
# is deleted, lab-out with it). Heavy: the clone installs its own environments and runs the whole suite or lab.
set -euo pipefail
target=${1:?usage: benchmarks/fresh-clone.sh test|lab}
case "$target" in test|lab) ;; *) echo "usage: benchmarks/fresh-clone.sh test|lab" >&2; exit 2;; esac
repo=$(cd "$(dirname "$0")/.." && pwd)
clone=$(mktemp -d /tmp/dslab-fresh-XXXXXX)
trap 'rm -rf "$clone"' EXIT
git clone -q "$repo" "$clone/repo"
cd "$clone/repo"
start=$(date +%s)
make "$target" > "$clone/make.log" 2>&1 || { tail -30 "$clone/make.log"; exit 1; }
end=$(date +%s)
echo "measured $(date -u +%F) on $(nproc) cores: make $target from a fresh clone of $(git rev-parse --short HEAD): $((end - start)) s, set-up included"
grep -E "passed|failed|wall time" "$clone/make.log" | tail -3
