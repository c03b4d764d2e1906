#!/usr/bin/env bash
# CTest smoke run of braid_compare (tests/CMakeLists.txt: perf.compare_smoke): 2 and 3 ranks under mpirun, every
# collective at a few small sizes (3 ranks: sizes that are not powers of two per rank), each library's result
# checked against closed forms by braid_compare itself (exit 1 and FAIL in the table on a wrong result).
# Usage: smoke_test.sh <braid_compare binary>
set -euo pipefail
bin=$1
export BRAID_TIMEOUT=60
for n in 2 3; do
  out=$(timeout 120 mpirun -np "$n" --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader \
    "$bin" -b 1K -e 256K -f 16 -n 1 -w 1 --max-iters 2 --no-ceiling 2>&1) || {
    echo "$out"
    echo "smoke_test: braid_compare failed at $n ranks" >&2
    exit 1
  }
  for c in all_reduce all_gather reduce_scatter alltoall; do
    rows=$(echo "$out" | awk -v h="## $c, $n ranks" '$0 ~ "^## " {on = index($0, h) == 1; next} on && /^ +[0-9]/' | wc -l)
    if [ "$rows" -ne 3 ]; then
      echo "$out"
      echo "smoke_test: expected 3 rows of $c at $n ranks, got $rows" >&2
      exit 1
    fi
  done
  if echo "$out" | grep -q FAIL; then
    echo "$out"
    exit 1
  fi
done
echo "smoke_test: braid_compare ok at 2 and 3 ranks"
