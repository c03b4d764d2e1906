#!/usr/bin/env bash
# `braid tune`: the tuner's table for a shipped topology, the rules file it writes (NCCL's example-tuner CSV
# format, runtime/nccl/tuner/rules.h) and error exits.
# Usage: tune_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"

# dgx-a100-x1: 8 GPUs on one node; a small simulated grid keeps the test fast. --policy model: a rule wherever
# Braid's fastest prediction differs from NCCL's choice.
expect_rc 0 "tune dgx-a100-x1 -o" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M --policy model -o "$tmp/rules.conf"
grep -q '^AllReduce  *1073741824 ' "$tmp/out" && ok || fail "the table has an all-reduce row at 1 GiB"
grep -q ' simulated  ' "$tmp/out" && ok || fail "some entries are simulated"
grep -q '^Broadcast .* analytical  .* keep ' "$tmp/out" && ok || fail "broadcast is NCCL's analytical ring, kept"
grep -q ' override ' "$tmp/out" && ok || fail "--policy model overrides somewhere"
[ -s "$tmp/rules.conf" ] && ok || fail "rules file written"
# Every rule line has 10 fields and this machine's node and rank counts; a collective's ranges ascend without overlap.
python3 - "$tmp/rules.conf" <<'PY' && ok || fail "rules file format"
import sys
lines = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
fields = [l.split(",") for l in lines]
assert fields and all(len(f) == 10 for f in fields), lines
assert all(f[6] == "1" and f[7] == "8" for f in fields), lines
for coll in {f[0] for f in fields}:
    rows = [f for f in fields if f[0] == coll]
    for r in rows:
        assert int(r[1]) <= int(r[2]), r
    for a, b in zip(rows, rows[1:]):
        assert int(b[1]) > int(a[2]), rows
# Window ends are grid sizes (powers of 4 from 256 B) or the geometric midpoints between neighbours (2 x 4^k: the
# last size of the lower window, + 1 the first of the upper one), 0 and 2^64 - 1 at the ends.
grid = {256 * 4 ** k for k in range(12)}
mids = {2 * g for g in grid}
assert all(int(f[1]) in grid | {m + 1 for m in mids} | {0} for f in fields), fields
assert all(int(f[2]) in grid | mids | {2 ** 64 - 1} for f in fields), fields
assert any(int(f[1]) - 1 in mids or int(f[2]) in mids for f in fields), "no window reaches a midpoint: " + str(fields)
PY

# Sizes above BRAID_TUNER_MAX_SIM_BYTES are extrapolated from the simulated grid: shown so, never validated, so the
# default policy overrides nothing there (on dgx-h100-x2 the extrapolated Ring/Simple looked 1.6x faster than NVLSTree
# at 1 GiB, where the full simulation has it 0.76x).
expect_rc 0 "tune dgx-h100-x2 --max-sim-bytes 1M" -- "$braid" tune -t dgx-h100-x2 --max-sim-bytes 1M
grep -q '^AllReduce  *1073741824 .* extrapolated ' "$tmp/out" && ok || fail "1 GiB all-reduce not shown extrapolated"
grep -q ' override ' "$tmp/out" && fail "validated policy overrode NCCL from extrapolated values" || ok

# The default policy (validated) on the shipped machines with NVLS: Braid's NVLS emulation is validated from 16 MiB
# (NVLS) and 32 MiB (NVLSTree); below that the table names the candidate, keeps NCCL's choice and says why, and no
# rule moves NCCL to NVLS or NVLSTree.
for machine in dgx-h100-x1 dgx-h100-x2; do
  expect_rc 0 "tune $machine" -- "$braid" tune -t "$machine" --max-sim-bytes 1M -o "$tmp/$machine.conf"
  python3 - "$tmp/out" "$tmp/$machine.conf" "$machine" <<'PY' && ok || fail "$machine: NVLS overrides below the validated sizes"
import sys
out, rules, machine = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines(), sys.argv[3]
validated_from = {"NVLS/Simple": 16 << 20, "NVLSTree/Simple": 32 << 20}
kept = 0
for line in out:
    f = line.split()
    if not f or f[0] != "AllReduce":
        continue
    size, nccl, candidate, decision = int(f[1]), f[2], f[4], f[8]
    if candidate in validated_from and size < validated_from[candidate]:
        assert decision == "keep", line
        if candidate != nccl:
            # Why: below the band, or (above --max-sim-bytes) extrapolated, not simulated.
            assert "candidate not validated" in line and ("validated from" in line or "extrapolated" in line), line
            kept += 1
assert kept > 0, "the NVLS candidate below its validated size is shown: " + machine
for r in rules:
    f = r.split(",")
    if not r.startswith("#") and f[3] in ("nvls", "nvls_tree"):
        assert int(f[1]) >= validated_from["NVLS/Simple" if f[3] == "nvls" else "NVLSTree/Simple"], r
PY
done
# --policy model on dgx-h100-x1: the NVLS emulation's small-size prediction wins (the behaviour BRAID_TUNER=model keeps).
expect_rc 0 "tune dgx-h100-x1 --policy model" -- "$braid" tune -t dgx-h100-x1 --max-sim-bytes 1M --policy model \
  -o "$tmp/model.conf"
grep -q '^allreduce,0,[0-9]*,nvls,simple,' "$tmp/model.conf" && ok || fail "--policy model: NVLS from 0 bytes"
grep -v '^#' "$tmp/out" >"$tmp/policy_model.rows"
expect_rc 2 "--policy off" -- "$braid" tune -t dgx-h100-x1 --policy off
grep -q 'expected validated or model' "$tmp/err" && ok || fail "--policy off: $(head -1 "$tmp/err")"
grep -q "^braid tune: --policy off: .*leaves NCCL's algorithm/protocol choices alone.*nothing to tune" "$tmp/err" && ok ||
  fail "--policy off: no reason: $(head -1 "$tmp/err")"
# Without --policy the table follows BRAID_TUNER, the tuner plugin's variable; --policy overrides it; the footer names
# the source. off and values that are no policy are refused naming the variable.
expect_rc 0 "BRAID_TUNER=model" -- env BRAID_TUNER=model "$braid" tune -t dgx-h100-x1 --max-sim-bytes 1M
grep -q '; policy model (BRAID_TUNER); ' "$tmp/out" && ok || fail "BRAID_TUNER=model: footer $(tail -1 "$tmp/out")"
grep -v '^#' "$tmp/out" | cmp -s - "$tmp/policy_model.rows" && ok || fail "BRAID_TUNER=model: not --policy model's table"
expect_rc 0 "BRAID_TUNER=model --policy validated" -- env BRAID_TUNER=model "$braid" tune -t dgx-h100-x1 \
  --max-sim-bytes 1M --policy validated
grep -q '; policy validated (--policy); ' "$tmp/out" && ok || fail "--policy over BRAID_TUNER: $(tail -1 "$tmp/out")"
expect_rc 0 "BRAID_TUNER unset" -- env -u BRAID_TUNER "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M
grep -q '; policy validated (default); ' "$tmp/out" && ok || fail "BRAID_TUNER unset: $(tail -1 "$tmp/out")"
expect_rc 2 "BRAID_TUNER=off" -- env BRAID_TUNER=off "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M
grep -q "^braid tune: BRAID_TUNER=off: .*leaves NCCL's algorithm/protocol choices alone.*nothing to tune" "$tmp/err" &&
  ok || fail "BRAID_TUNER=off: $(head -1 "$tmp/err")"
[ ! -s "$tmp/out" ] && ok || fail "BRAID_TUNER=off printed on stdout"
expect_rc 2 "BRAID_TUNER=bogus" -- env BRAID_TUNER=bogus "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M
grep -q "^braid tune: BRAID_TUNER=bogus: not a tuner policy" "$tmp/err" && ok || fail "BRAID_TUNER=bogus: $(head -1 "$tmp/err")"
expect_rc 0 "BRAID_TUNER=bogus --policy model" -- env BRAID_TUNER=bogus "$braid" tune -t dgx-a100-x1 \
  --max-sim-bytes 1M --policy model

expect_rc 2 "--ranks that differs from the topology" -- "$braid" tune -t dgx-a100-x1 --ranks 16
grep -q 'has 8 GPUs' "$tmp/err" && ok || fail "the --ranks error names the GPU count"
expect_rc 2 "bad --max-sim-bytes" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 12Q
expect_rc 2 "--max-sim-bytes below 1M" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 4K
grep -q 'at least 1048576' "$tmp/err" && ok || fail "the --max-sim-bytes error names the minimum"
expect_rc 1 "unknown topology" -- "$braid" tune -t no-such-machine
# Errors carry the message alone, as every command prints them: no status-code name ("not found: ...") before it.
grep -q "^braid tune: no-such-machine" "$tmp/err" && ok || fail "unknown topology: $(head -1 "$tmp/err")"
expect_rc 1 "missing log" -- "$braid" tune --nccl-tests-log "$tmp/no-such.log=Ring/LL"
grep -qF "braid tune: $tmp/no-such.log: no such file" "$tmp/err" && ok || fail "missing log: $(head -1 "$tmp/err")"
expect_rc 2 "negative --nodes" -- "$braid" tune --nccl-tests-log "$tmp/no-such.log=Ring/LL" --nodes -2
grep -qF -- "--nodes -2: a count is at least 1" "$tmp/err" && ok || fail "--nodes -2: $(head -1 "$tmp/err")"
expect_rc 2 "negative --ranks" -- "$braid" tune --nccl-tests-log "$tmp/no-such.log=Ring/LL" --ranks -8
# A log that cannot be read is an input error (exit 1) as a missing one is, whatever the reason: a directory, a loop
# of symbolic links, a binary file, an empty file; the usage errors (2) are what the command line says of the log.
mkdir "$tmp/logdir"
ln -s "$tmp/logloopB" "$tmp/logloopA"
ln -s "$tmp/logloopA" "$tmp/logloopB"
printf 'x\0y' >"$tmp/binary_all_reduce.txt"
: >"$tmp/empty_all_reduce.txt"
for bad in "logdir:is a directory, not a file" "logloopA:too many levels of symbolic links" \
  "binary_all_reduce.txt:not a text file (NUL byte at offset 1)" "empty_all_reduce.txt:empty file"; do
  f=${bad%%:*}
  expect_rc 1 "unreadable log $f" -- "$braid" tune --nccl-tests-log "$tmp/$f=Ring/LL"
  grep -qF "braid tune: $tmp/$f: ${bad#*:}" "$tmp/err" && ok || fail "unreadable log $f: $(head -1 "$tmp/err")"
done
# -o into a missing directory fails before the model is built (a 1G grid would take seconds), with nothing on stdout;
# a path below a file is refused the same way.
start=$(date +%s)
expect_rc 1 "-o into a missing directory" -- "$braid" tune -t dgx-a100-x1 -o "$tmp/nonexistent/r.conf"
[ $(($(date +%s) - start)) -le 2 ] && ok || fail "-o into a missing directory: refused only after $(($(date +%s) - start)) s"
grep -qF "cannot write $tmp/nonexistent/r.conf: directory $tmp/nonexistent does not exist" "$tmp/err" && ok ||
  fail "-o missing directory message: $(head -1 "$tmp/err")"
[ ! -s "$tmp/out" ] && ok || fail "-o into a missing directory printed on stdout: $(head -2 "$tmp/out")"
touch "$tmp/plainfile"
expect_rc 1 "-o below a file" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M -o "$tmp/plainfile/r.conf"
grep -qF "$tmp/plainfile is not a directory" "$tmp/err" && ok || fail "-o below a file: $(head -1 "$tmp/err")"
[ ! -s "$tmp/out" ] && ok || fail "-o below a file printed on stdout"
# A rules file that cannot be written once the table is built (-o names an existing directory): nothing on stdout.
expect_rc 1 "-o naming a directory" -- "$braid" tune -t dgx-a100-x1 --max-sim-bytes 1M -o "$tmp"
[ ! -s "$tmp/out" ] && ok || fail "-o naming a directory printed on stdout: $(head -2 "$tmp/out")"

# Rules from measured nccl-tests logs: the published 2-node H100 all-reduce log (RC-50) as NCCL's own choice, and a
# Ring/LL run derived from it, 20 % faster up to 64 KiB and 20 % slower above (the derived rows keep nccl-tests'
# column layout, and lose their '#' header lines as pasted logs do).
h100="$rc_dir/nccltests/hgx-h100-xe9680-2node-16rank-all_reduce_perf.txt"
if [ -f "$h100" ]; then
  python3 - "$h100" "$tmp/ar_ring_ll_all_reduce.txt" <<'PY'
import sys
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 13 and f[0].isdigit():
        size = int(f[0])
        scale = 0.8 if size <= 65536 else 1.2
        for i in (5, 9):
            f[i] = "%.2f" % (float(f[i]) * scale)
        line = "  ".join(f) + "\n"
    out.write(line.replace("#", "", 1) if line.startswith("#") else line)
PY
  # The same log without the lines that name its collective and list its ranks.
  grep -v '^#\|Collective test\|all_reduce' "$h100" >"$tmp/measurements.txt"
  expect_rc 0 "tune from logs" -- "$braid" tune --nccl-tests-log "$h100=default" \
    --nccl-tests-log "$tmp/ar_ring_ll_all_reduce.txt=Ring/LL" -o "$tmp/measured.conf"
  grep -q 'warning' "$tmp/err" && fail "two settings compared, yet a warning: $(head -1 "$tmp/err")" || ok
  grep -q '^AllReduce  *65536 Ring/LL ' "$tmp/out" && ok || fail "Ring/LL chosen at 64 KiB"
  grep -q '^AllReduce  *131072 NCCL default ' "$tmp/out" && ok || fail "NCCL's own choice kept at 128 KiB"
  grep -Eq ' 1\.2(4[89]|5[0-2])x' "$tmp/out" && ok || fail "the speedup over NCCL's own choice is printed (1/0.8)"
  # One rule, [0, floor(sqrt(65536 * 131072)) = 92681], Ring/LL, for 2 nodes and 16 ranks.
  [ "$(grep -v '^#' "$tmp/measured.conf")" = "allreduce,0,92681,ring,ll,-1,2,16,-1,-1" ] && ok ||
    fail "rules from the logs: $(grep -v '^#' "$tmp/measured.conf" | tr '\n' ' ')"
  # NCCL's default run alone: nothing to compare, and no rule can pin NCCL's own choice; the warning says so.
  expect_rc 0 "tune from NCCL's default run alone" -- "$braid" tune --nccl-tests-log "$h100=default" \
    -o "$tmp/default-only.conf"
  grep -q "warning: every log measures one setting (default): NCCL's own choice, which a rule cannot pin, so the rules file holds no rule" \
    "$tmp/err" && ok || fail "default-only warning: $(head -1 "$tmp/err")"
  [ -z "$(grep -v '^#' "$tmp/default-only.conf")" ] && ok || fail "rules from NCCL's default run alone"
  # Rules written where BRAID_TUNER=off would be ignored by the plugin: the same rules, and a warning saying so.
  expect_rc 0 "tune from logs, BRAID_TUNER=off" -- env BRAID_TUNER=off "$braid" tune --nccl-tests-log "$h100=default" \
    --nccl-tests-log "$tmp/ar_ring_ll_all_reduce.txt=Ring/LL" -o "$tmp/measured_off.conf"
  grep -q "warning: BRAID_TUNER=off is set here" "$tmp/err" && ok || fail "BRAID_TUNER=off: no warning: $(head -1 "$tmp/err")"
  cmp -s <(grep -v '^#' "$tmp/measured.conf") <(grep -v '^#' "$tmp/measured_off.conf") && ok ||
    fail "BRAID_TUNER=off changed the measured rules"
  # The logs' device lists ("# Rank N ... on HOST device D [BUS] NAME") must describe one machine: other hosts and
  # another PCI bus for a rank are warned about, another GPU model is refused (status 2, nothing on stdout).
  sed 's/ on node-A / on node-C /; s/ on node-B / on node-D /; s/\[0000:19:00\]/[0000:1a:00]/' \
    "$tmp/ar_ring_ll_all_reduce.txt" >"$tmp/other_hosts_all_reduce.txt"
  expect_rc 0 "logs of other hosts" -- "$braid" tune --nccl-tests-log "$h100=default" \
    --nccl-tests-log "$tmp/other_hosts_all_reduce.txt=Ring/LL"
  grep -qF "warning: $h100 ran on node-A, node-B, $tmp/other_hosts_all_reduce.txt on node-C, node-D" "$tmp/err" && ok ||
    fail "logs of other hosts: no host warning: $(head -2 "$tmp/err")"
  grep -qF "warning: rank 0 is at PCI bus [0000:19:00] in $h100 (line 4) but [0000:1a:00]" "$tmp/err" && ok ||
    fail "logs of other hosts: no bus warning: $(head -3 "$tmp/err")"
  sed 's/NVIDIA H100 80GB HBM3/NVIDIA H200/' "$tmp/ar_ring_ll_all_reduce.txt" >"$tmp/h200_all_reduce.txt"
  expect_rc 2 "logs of other GPUs" -- "$braid" tune --nccl-tests-log "$h100=default" \
    --nccl-tests-log "$tmp/h200_all_reduce.txt=Ring/LL"
  grep -qF "the logs ran on different GPUs: rank 0 is a NVIDIA H100 80GB HBM3 in $h100" "$tmp/err" && ok ||
    fail "logs of other GPUs: $(head -2 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "logs of other GPUs printed on stdout"
  # --ranks must agree with the 16 ranks the log lists (it only names the rank count of logs that list none).
  expect_rc 2 "--ranks 8 on a 16-rank log" -- "$braid" tune --nccl-tests-log "$h100=Ring/LL" --ranks 8 \
    -o "$tmp/contradicted.conf"
  grep -qF -- "--ranks 8 contradicts the 16 ranks in $h100" "$tmp/err" && ok || fail "--ranks 8: $(head -1 "$tmp/err")"
  [ ! -e "$tmp/contradicted.conf" ] && ok || fail "--ranks 8: no rules file written"
  [ ! -s "$tmp/out" ] && ok || fail "--ranks 8: nothing on stdout, got $(head -1 "$tmp/out")"
  expect_rc 0 "--ranks 16 on a 16-rank log" -- "$braid" tune --nccl-tests-log "$h100=Ring/LL" --ranks 16 \
    -o "$tmp/agreed.conf"
  [ "$(grep -v '^#' "$tmp/agreed.conf" | cut -d, -f8 | sort -u)" = 16 ] && ok || fail "--ranks 16: rules for 16 ranks"
  grep -q 'warning: every log measures one setting (Ring/LL)' "$tmp/err" && ok || fail "one setting: no warning"
  expect_rc 0 "--ranks 8 on a log without rank lines" -- "$braid" tune --nccl-tests-log "$tmp/measurements.txt=Ring/LL" \
    --coll allreduce --ranks 8 -o "$tmp/unlisted.conf"
  [ "$(grep -v '^#' "$tmp/unlisted.conf" | cut -d, -f8 | sort -u)" = 8 ] && ok || fail "--ranks 8: rules for 8 ranks"
  # Two logs of one setting: refused before any header line is printed.
  expect_rc 2 "the same log twice" -- "$braid" tune --nccl-tests-log "$h100=Ring/LL" --nccl-tests-log "$h100=Ring/LL"
  grep -q 'give one log per setting' "$tmp/err" && ok || fail "duplicate logs: $(head -1 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "duplicate logs: nothing on stdout, got $(head -1 "$tmp/out")"
  expect_rc 1 "logs, -o into a missing directory" -- "$braid" tune --nccl-tests-log "$h100=Ring/LL" \
    -o "$tmp/nonexistent/r.conf"
  grep -q 'does not exist' "$tmp/err" && ok || fail "logs, -o missing directory: $(head -1 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "logs, -o missing directory: nothing on stdout"
  expect_rc 2 "a log without its setting" -- "$braid" tune --nccl-tests-log "$h100"
  grep -q 'FILE=ALGO/PROTO' "$tmp/err" && ok || fail "the error says how to name the setting"
  expect_rc 2 "an all-to-all log" -- "$braid" tune --nccl-tests-log \
    "$rc_dir/nccltests/h20-vm-2node-4rank-alltoall_perf.txt=Ring/LL"
  # --coll names the collective of a log that does not say, in the other commands' spelling or NCCL's; an unknown
  # name is reported as such.
  for coll in allreduce all_reduce AllReduce; do
    expect_rc 0 "tune --coll $coll" -- "$braid" tune --coll "$coll" --nccl-tests-log "$tmp/measurements.txt=Ring/LL"
    grep -q '^AllReduce  *65536 Ring/LL ' "$tmp/out" && ok || fail "--coll $coll: all-reduce rows"
  done
  expect_rc 0 "tune --coll allgather" -- "$braid" tune --coll allgather --nccl-tests-log "$tmp/measurements.txt=Ring/LL"
  grep -q '^AllGather  *65536 Ring/LL ' "$tmp/out" && ok || fail "--coll allgather: all-gather rows"
  expect_rc 2 "tune --coll foo" -- "$braid" tune --coll foo --nccl-tests-log "$tmp/measurements.txt=Ring/LL"
  grep -q "unknown collective 'foo'" "$tmp/err" && ok || fail "--coll foo: $(head -1 "$tmp/err")"
  expect_rc 2 "tune --coll foo, log that names its collective" -- "$braid" tune --coll foo --nccl-tests-log "$h100=default"
  grep -q "unknown collective 'foo'" "$tmp/err" && ok || fail "--coll foo with a named log: $(head -1 "$tmp/err")"
  expect_rc 2 "tune --coll alltoall" -- "$braid" tune --coll alltoall --nccl-tests-log "$tmp/measurements.txt=Ring/LL"
  grep -q "alltoall is not decided by NCCL's tuner" "$tmp/err" && ok || fail "--coll alltoall: $(head -1 "$tmp/err")"
  # A --coll or --nodes that contradicts what the log says (all_reduce, 2 hosts) is refused naming both.
  expect_rc 2 "tune --coll alltoall, all_reduce log" -- "$braid" tune --nccl-tests-log "$h100=Tree/LL" --coll alltoall
  grep -qF -- "--coll alltoall contradicts the collective of $h100: it measured all_reduce" "$tmp/err" && ok ||
    fail "--coll alltoall on an all_reduce log: $(head -1 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "--coll alltoall on an all_reduce log printed on stdout"
  expect_rc 2 "tune --coll allgather, all_reduce log" -- "$braid" tune --nccl-tests-log "$h100=Tree/LL" --coll allgather
  grep -qF -- "--coll all_gather contradicts the collective of $h100: it measured all_reduce" "$tmp/err" && ok ||
    fail "--coll allgather on an all_reduce log: $(head -1 "$tmp/err")"
  expect_rc 0 "tune --coll all_reduce, all_reduce log" -- "$braid" tune --nccl-tests-log "$h100=Tree/LL" --coll all_reduce
  expect_rc 2 "--nodes 5 on a 2-host log" -- "$braid" tune --nccl-tests-log "$h100=Tree/LL" --nodes 5
  grep -qF -- "--nodes 5 contradicts the 2 hosts in $h100" "$tmp/err" && ok || fail "--nodes 5: $(head -1 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "--nodes 5 printed on stdout"
  expect_rc 0 "--nodes 2 on a 2-host log" -- "$braid" tune --nccl-tests-log "$h100=Tree/LL" --nodes 2 -o "$tmp/n2.conf"
  [ "$(grep -v '^#' "$tmp/n2.conf" | cut -d, -f7 | sort -u)" = 2 ] && ok || fail "--nodes 2: rules for 2 nodes"
  expect_rc 0 "--nodes 4 on a log without hosts" -- "$braid" tune --nccl-tests-log "$tmp/measurements.txt=Ring/LL" \
    --coll allreduce --nodes 4 -o "$tmp/n4.conf"
  [ "$(grep -v '^#' "$tmp/n4.conf" | cut -d, -f7 | sort -u)" = 4 ] && ok || fail "--nodes 4: rules for 4 nodes"
  expect_rc 2 "--topology with logs" -- "$braid" tune -t dgx-a100-x1 --nccl-tests-log "$h100=default"
  printf '1024 256 float sum -1 1.0 x\n' >"$tmp/bad_all_reduce.txt"
  expect_rc 1 "a malformed log" -- "$braid" tune --nccl-tests-log "$tmp/bad_all_reduce.txt=Ring/LL"
  grep -q 'bad_all_reduce.txt:1: field 7 (out-of-place algbw)' "$tmp/err" && ok || fail "the error names file, line, field"
else
  skip "realcases nccl-tests logs absent"
fi
expect_rc 2 "neither topology nor logs" -- "$braid" tune
finish
