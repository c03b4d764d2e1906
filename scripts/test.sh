#!/usr/bin/env bash
# The README's second command: install dependencies, build, and run the whole test suite
# (unit, corpus, cli, format, install). Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir "${BRAID_BUILD_DIR:-build}" --output-on-failure -j "${BRAID_JOBS:-$(nproc)}" "$@"
