#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then build and run a consumer that uses find_package(braid).
set -euo pipefail
build_dir=$1
src_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/braid"
test -f "$tmp/prefix/include/braid/algorithm.h"
test -f "$tmp/prefix/share/braid/topologies/dgx1-v100.yaml"
cmake -S "$src_dir/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"
# The installed CLI finds the installed topologies by itself (not the source tree's copy).
json=$(env -u BRAID_TOPOLOGY_DIR "$tmp/prefix/bin/braid" topo show dgx1-v100 --json)
echo "$json" | grep -q '"gpus": *8'
echo "$json" | grep -q "\"source\": *\"$tmp/prefix/share/braid/topologies/dgx1-v100.yaml\""
echo "install test passed"
