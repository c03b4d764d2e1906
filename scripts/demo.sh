#!/usr/bin/env bash
# The README's first command: install dependencies, build, and run Braid's main job on the bundled
# default topology (topologies/dgx1-v100.yaml). Extra arguments go to `braid demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh braid  # the CLI alone; scripts/test.sh builds the rest
"${BRAID_BUILD_DIR:-build}/bin/braid" demo "$@"
