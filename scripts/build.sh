#!/usr/bin/env bash
# Configures and builds Braid into ${BRAID_BUILD_DIR:-build} (Ninja, RelWithDebInfo). Arguments name the targets
# to build (e.g. `scripts/build.sh braid`: the CLI alone); none builds everything, tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BRAID_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BRAID_BUILD_TYPE:-RelWithDebInfo} ${BRAID_CMAKE_ARGS:-}
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "${BRAID_JOBS:-$(nproc)}" "${targets[@]}"
