#!/usr/bin/env bash
# `braid tune`: the tuner's table for a shipped topology, the rules file it writes (NCCL's example-tuner CSV
# format, runtime/nccl/tuner/rules.h) and error exits.
# Usage: tune_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"

# dgx-a100-x1: 8 GPUs on one node; a small simulated grid keeps the test fast.
expect_rc 0 "tune dgx-a100-x1 -o" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M -o "$tmp/rules.conf"
grep -q '^AllReduce  *1073741824 ' "$tmp/out" && ok || fail "the table has an all-reduce row at 1 GiB"
grep -q 'simulated$' "$tmp/out" && ok || fail "some entries are simulated"
grep -q '^Broadcast .* analytical$' "$tmp/out" && ok || fail "broadcast is NCCL's analytical ring"
[ -s "$tmp/rules.conf" ] && ok || fail "rules file written"
# Every rule line has 10 fields, this machine's node and rank counts, and the five collectives are covered.
python3 - "$tmp/rules.conf" <<'PY' && ok || fail "rules file format"
import sys
lines = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
fields = [l.split(",") for l in lines]
assert fields and all(len(f) == 10 for f in fields), lines
assert all(f[6] == "1" and f[7] == "8" for f in fields), lines
assert {f[0] for f in fields} == {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}, lines
for coll in {f[0] for f in fields}:
    rows = [f for f in fields if f[0] == coll]
    assert rows[0][1] == "0" and rows[-1][2] == str(2**64 - 1), rows
    for a, b in zip(rows, rows[1:]):
        assert int(b[1]) == int(a[2]) + 1, rows
PY

expect_rc 2 "--ranks that differs from the topology" -- "$braid" tune -t dgx-a100-x1 --ranks 16
grep -q 'has 8 GPUs' "$tmp/err" && ok || fail "the --ranks error names the GPU count"
expect_rc 2 "bad --max-sim-bytes" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 12Q
expect_rc 2 "--max-sim-bytes below 1M" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 4K
grep -q 'at least 1048576' "$tmp/err" && ok || fail "the --max-sim-bytes error names the minimum"
expect_rc 1 "unknown topology" -- "$braid" tune -t no-such-machine
finish
