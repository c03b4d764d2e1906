#!/usr/bin/env bash
# Configures and builds Braid into ${BRAID_BUILD_DIR:-build} (Ninja, RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BRAID_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BRAID_BUILD_TYPE:-RelWithDebInfo} ${BRAID_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "${BRAID_JOBS:-$(nproc)}"
