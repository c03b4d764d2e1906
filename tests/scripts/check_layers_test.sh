#!/usr/bin/env bash
# scripts/check-layers.py: the tree follows the dependency rule, and the script catches a wrong-way include, an
# include of another folder's private header and an unmapped public header, each reported as file:line.
set -uo pipefail
src_dir=$1
script="$src_dir/scripts/check-layers.py"
fails=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

out=$(python3 "$script" --root "$src_dir" 2>&1)
rc=$?
check "the source tree follows the rule" test "$rc" -eq 0
[ "$rc" -eq 0 ] || echo "$out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/braid" "$tmp/runtime/plan" "$tmp/runtime/executor" "$tmp/synthesizer" "$tmp/src/common"
printf '#pragma once\n' >"$tmp/include/braid/status.h"
printf '#pragma once\n#include "braid/status.h"\n' >"$tmp/include/braid/synthesize.h"
printf '#pragma once\n' >"$tmp/include/braid/plan.h"
printf '#pragma once\n' >"$tmp/runtime/plan/lower_internal.h"
printf '#pragma once\n' >"$tmp/src/common/text.h"
# Allowed: a layer's own private header, a public header below, src/common from anywhere.
printf '#include "plan/lower_internal.h"\n#include "braid/plan.h"\n#include "common/text.h"\n' >"$tmp/runtime/plan/lower.cc"
out=$(python3 "$script" --root "$tmp" runtime/plan/lower.cc 2>&1)
check "allowed includes pass" test $? -eq 0

# The runtime including the synthesizer's public header (line 2).
printf '#include <vector>\n#include "braid/synthesize.h"\n' >"$tmp/runtime/plan/bad.cc"
# The executor reaching into lowering's private header (line 3).
printf '#include "braid/plan.h"\n\n#include "plan/lower_internal.h"\n' >"$tmp/runtime/executor/executor.cc"
# The synthesizer including the runtime's public header (line 1).
printf '#include <braid/plan.h>\n' >"$tmp/synthesizer/routing.cc"
# A public header the script does not know.
printf '#pragma once\n' >"$tmp/include/braid/new_thing.h"
out=$(python3 "$script" --root "$tmp" runtime/plan/bad.cc runtime/executor/executor.cc synthesizer/routing.cc \
  include/braid/new_thing.h 2>&1)
rc=$?
echo "$out"
check "wrong-way includes fail" test "$rc" -eq 1
check "runtime -> synthesizer named with file:line" grep -q '^runtime/plan/bad.cc:2: .*runtime may not include synthesizer' <<<"$out"
check "private header named with file:line" grep -q '^runtime/executor/executor.cc:3: .*private to runtime/plan/' <<<"$out"
check "synthesizer -> runtime named with file:line" grep -q '^synthesizer/routing.cc:1: .*synthesizer may not include runtime' <<<"$out"
check "unmapped public header named" grep -q '^include/braid/new_thing.h:1: public header without a layer' <<<"$out"

# The NCCL-API shim's companion (runtime/nccl/shim/pareto, layer nccl_pareto) may use the Pareto set; the shim may not.
mkdir -p "$tmp/runtime/nccl/shim/pareto"
printf '#pragma once\n' >"$tmp/include/braid/pareto.h"
printf '#include "braid/pareto.h"\n' >"$tmp/runtime/nccl/shim/pareto/companion.cc"
out=$(python3 "$script" --root "$tmp" runtime/nccl/shim/pareto/companion.cc 2>&1)
check "the shim's companion may include pareto.h" test $? -eq 0
printf '#include "braid/pareto.h"\n' >"$tmp/runtime/nccl/shim/shim.cc"
out=$(python3 "$script" --root "$tmp" runtime/nccl/shim/shim.cc 2>&1)
check "the shim itself may not" grep -q '^runtime/nccl/shim/shim.cc:1: .*nccl may not include pareto' <<<"$out"

echo "$((9 - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
