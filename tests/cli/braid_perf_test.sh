#!/usr/bin/env bash
# End-to-end tests of braid_perf (docs/braid_perf.md) through its nccl-tests names in the braid binary's folder:
# the all_reduce_perf table (header, device lines, the two-level column header as real nccl-tests prints it, one
# row per size with nccl-tests' counts, algbw/busbw consistent with the time, #wrong 0, footer with the mean
# busbw), all six collectives with threads (-t 2) and with forked processes (-p 2), every type and op (-d all
# -o all), roots (-r all), -c 0 (N/A), in-place all-to-all (N/A), -b 0 (one zero-size row), -J JSON (a path that
# cannot be written is refused before the sweep), --transport tcp, --algo with an algorithm written by `braid
# algo`, and bad flags (exit 2).
# Usage: braid_perf_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
bin=$(cd "$(dirname "$braid")" && pwd)
if [ ! -x "$bin/braid_perf" ] || [ ! -e "$bin/all_reduce_perf" ]; then
  echo "FAIL: $bin/braid_perf or its symlinks are missing (build the braid_perf target)"
  exit 1
fi
export BRAID_TIMEOUT=60

# rows FILE: the data rows (lines not starting with '#').
rows() { grep -v '^#' "$1" | grep -v '^$'; }

# check_rows WHAT FILE AWK_CONDITION: every row satisfies the awk condition (fields: 1 size 2 count 3 type 4 redop
# 5 root 6-9 out-of-place time algbw busbw #wrong, 10-13 in-place).
check_rows() {
  local what=$1 file=$2 cond=$3
  local bad
  bad=$(rows "$file" | awk "!($cond)" | head -3)
  if [ -n "$bad" ]; then fail "$what: rows fail [$cond]: $bad"; else ok; fi
}

# --- all_reduce_perf -b 8 -e 1M -f 4 -t 3: the whole table.
expect_rc 0 "all_reduce_perf -t 3" -- "$bin/all_reduce_perf" -b 8 -e 1M -f 4 -t 3
cp "$tmp/out" "$tmp/ar.txt"
head -1 "$tmp/ar.txt" | grep -q '^# Braid braid_perf version [0-9.]* (nccl-tests format)$' && ok || fail "first line: $(head -1 "$tmp/ar.txt")"
sed -n 2p "$tmp/ar.txt" | grep -qx '# Collective test starting: all_reduce_perf' && ok || fail "line 2: $(sed -n 2p "$tmp/ar.txt")"
grep -qx '# nThread 3 nGpus 1 minBytes 8 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0' \
  "$tmp/ar.txt" && ok || fail "parameter line: $(sed -n 3p "$tmp/ar.txt")"
grep -A4 -x '# Using devices' "$tmp/ar.txt" >"$tmp/dev.txt"
n_dev=$(grep -c '^#  Rank  [0-2] Group  0 Pid  *[0-9]* on  *[^ ]* device  0 \[cpu\] CPU' "$tmp/dev.txt")
[ "$n_dev" -eq 3 ] && ok || fail "device lines: $(cat "$tmp/dev.txt")"
[ "$(grep '^#  Rank' "$tmp/ar.txt" | awk '{print $7}' | sort -u | wc -l)" -eq 1 ] && ok || fail "threads share one pid"
# The column header, character for character as nccl-tests prints it (from a real nccl-tests output).
real="$rc_dir/nccltests/gcp-a3mega-h100-2node-16rank-all_reduce_perf.txt"
if [ -f "$real" ]; then
  grep -A2 'out-of-place' "$real" >"$tmp/hdr.want"
  grep -A2 'out-of-place' "$tmp/ar.txt" >"$tmp/hdr.got"
  cmp -s "$tmp/hdr.want" "$tmp/hdr.got" && ok || fail "column header differs from nccl-tests': $(diff "$tmp/hdr.want" "$tmp/hdr.got" | head -4)"
else
  grep -q '^#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong$' \
    "$tmp/ar.txt" && ok || fail "column names"
fi
# Sizes 8 x 4^k up to 1M, count = size / 4 floats, 13 columns, #wrong 0 in both modes.
[ "$(rows "$tmp/ar.txt" | awk '{print $1}' | tr '\n' ' ')" = "8 32 128 512 2048 8192 32768 131072 524288 " ] && ok ||
  fail "sizes: $(rows "$tmp/ar.txt" | awk '{print $1}' | tr '\n' ' ')"
check_rows "all_reduce -t 3" "$tmp/ar.txt" 'NF == 13 && $2 == $1 / 4 && $3 == "float" && $4 == "sum" && $5 == -1 && $9 == 0 && $13 == 0'
# algbw = size / time (B/us = 1e-3 GB/s), busbw = algbw x 2(n-1)/n = 4/3 algbw, within the printed rounding.
check_rows "all_reduce bandwidths" "$tmp/ar.txt" \
  '($7 - $1 / $6 / 1000) ^ 2 <= (0.006 + 0.002 * $7) ^ 2 && ($8 - $7 * 4 / 3) ^ 2 <= 0.011 ^ 2 &&
   ($11 - $1 / $10 / 1000) ^ 2 <= (0.006 + 0.002 * $11) ^ 2 && ($12 - $11 * 4 / 3) ^ 2 <= 0.011 ^ 2'
grep -qx '# Out of bounds values : 0 OK' "$tmp/ar.txt" && ok || fail "out of bounds line"
# Avg bus bandwidth = mean busbw over rows and both modes.
avg=$(grep '^# Avg bus bandwidth    : ' "$tmp/ar.txt" | awk '{print $6}')
mean=$(rows "$tmp/ar.txt" | awk '{s += $8 + $12; n += 2} END {print s / n}')
awk -v a="$avg" -v m="$mean" 'BEGIN {exit !(a != "" && a - m <= 0.006 && m - a <= 0.006)}' && ok || fail "avg busbw $avg, rows' mean $mean"
[ "$(tail -2 "$tmp/ar.txt" | head -1)" = "#" ] && ok || fail "a '#' line before the last"
tail -1 "$tmp/ar.txt" | grep -qx '# Collective test concluded: all_reduce_perf' && ok || fail "last line: $(tail -1 "$tmp/ar.txt")"

# --- Every collective, threads and processes. Sizes 64, 2048, 65536 floats' bytes.
for coll in all_reduce all_gather reduce_scatter alltoall broadcast reduce; do
  for mode in "-t 2" "-p 2" "-p 2 -t 2"; do
    # shellcheck disable=SC2086
    expect_rc 0 "${coll}_perf $mode" -- "$bin/${coll}_perf" -b 64 -e 64K -f 32 -n 2 $mode
    n=$(echo "$mode" | awk '{p = 1; t = 1; for (i = 1; i < NF; i += 2) { if ($i == "-p") p = $(i + 1); if ($i == "-t") t = $(i + 1) } print p * t}')
    [ "$(grep -c '^#  Rank' "$tmp/out")" -eq "$n" ] && ok || fail "$coll $mode: $(grep -c '^#  Rank' "$tmp/out") device lines, want $n"
    case $mode in
      *-p*) [ "$(grep '^#  Rank' "$tmp/out" | awk '{print $7}' | sort -u | wc -l)" -eq 2 ] && ok || fail "$coll $mode: two processes' pids" ;;
    esac
    [ "$(rows "$tmp/out" | wc -l)" -eq 3 ] && ok || fail "$coll $mode: $(rows "$tmp/out" | wc -l) rows"
    case $coll in
      all_reduce) cond='$2 == $1 / 4 && $4 == "sum" && $5 == -1' ;;
      broadcast) cond='$2 == $1 / 4 && $4 == "none" && $5 == 0' ;;
      reduce) cond='$2 == $1 / 4 && $4 == "sum" && $5 == 0' ;;
      # Per-rank count: (bytes / 4 / n) rounded down to 4 floats (16 bytes); size = count x 4 x n.
      all_gather | alltoall) cond='$4 == "none" && $5 == -1' ;;
      reduce_scatter) cond='$4 == "sum" && $5 == -1' ;;
    esac
    case $coll in
      all_gather | alltoall | reduce_scatter)
        rows "$tmp/out" | awk '{print $1, $2}' >"$tmp/sc.got"
        for s in 64 2048 65536; do awk -v s=$s -v n=$n 'BEGIN {c = int(int(s / 4 / n) / 4) * 4; print c * 4 * n, c}'; done >"$tmp/sc.want"
        cmp -s "$tmp/sc.got" "$tmp/sc.want" && ok || fail "$coll $mode sizes/counts: $(tr '\n' ' ' <"$tmp/sc.got") want $(tr '\n' ' ' <"$tmp/sc.want")"
        ;;
    esac
    # In-place all-to-all runs but is not checked, as nccl-tests: #wrong N/A.
    in_place_wrong=0
    [ "$coll" = alltoall ] && in_place_wrong='"N/A"'
    check_rows "$coll $mode" "$tmp/out" "NF == 13 && \$3 == \"float\" && \$9 == 0 && \$13 == $in_place_wrong && $cond"
    grep -qx '# Out of bounds values : 0 OK' "$tmp/out" && ok || fail "$coll $mode: out of bounds line"
  done
done

# --- Every type and op (and every root of reduce): all checked, nothing wrong.
expect_rc 0 "all_reduce_perf -d all -o all" -- "$bin/all_reduce_perf" -b 8 -e 1K -f 8 -t 2 -n 1 -d all -o all
[ "$(rows "$tmp/out" | wc -l)" -eq 150 ] && ok || fail "-d all -o all: $(rows "$tmp/out" | wc -l) rows, want 10 x 5 x 3"
[ "$(rows "$tmp/out" | awk '{print $3}' | sort -u | tr '\n' ' ')" = "bfloat16 double float half int32 int64 int8 uint32 uint64 uint8 " ] &&
  ok || fail "-d all types: $(rows "$tmp/out" | awk '{print $3}' | sort -u | tr '\n' ' ')"
[ "$(rows "$tmp/out" | awk '{print $4}' | sort -u | tr '\n' ' ')" = "avg max min prod sum " ] && ok || fail "-o all ops"
check_rows "-d all -o all" "$tmp/out" '$9 == 0 && $13 == 0'
expect_rc 0 "reduce_scatter_perf -d all -o all -t 3" -- "$bin/reduce_scatter_perf" -b 256 -e 4K -f 16 -t 3 -n 1 -d all -o all
check_rows "reduce_scatter -d all -o all" "$tmp/out" '$9 == 0 && $13 == 0 && $2 > 0'
expect_rc 0 "reduce_perf -r all" -- "$bin/reduce_perf" -b 1K -e 1K -t 3 -n 1 -d half -o max -r all
[ "$(rows "$tmp/out" | awk '{print $5}' | tr '\n' ' ')" = "0 1 2 " ] && ok || fail "-r all roots: $(rows "$tmp/out" | awk '{print $5}' | tr '\n' ' ')"
check_rows "reduce -r all" "$tmp/out" '$3 == "half" && $4 == "max" && $9 == 0 && $13 == 0'

# --- braid_perf <collective>, -c 0, -J, --transport tcp.
expect_rc 0 "braid_perf all_gather -c 0 -J" -- "$bin/braid_perf" all_gather -b 1K -e 4K -f 2 -t 2 -n 2 -c 0 -J "$tmp/ag.json" --transport tcp
grep -q '^# Collective test starting: all_gather_perf$' "$tmp/out" && ok || fail "braid_perf all_gather test name"
grep -q 'transport tcp' "$tmp/out" && ok || fail "--transport tcp not in the header"
check_rows "-c 0" "$tmp/out" '$9 == "N/A" && $13 == "N/A"'
if python3 - "$tmp/ag.json" "$tmp/out" >"$tmp/py.out" 2>&1 <<'EOF'; then ok; else fail "-J: $(head -3 "$tmp/py.out")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
assert d["collective"] == "all_gather", d["collective"]
assert d["config"]["nthreads"] == 2 and d["config"]["nranks"] == 2 and d["config"]["step_factor"] == 2, d["config"]
assert len(d["config"]["devices"]) == 2
assert len(d["results"]) == len(rows) == 3, (len(d["results"]), len(rows))
for r, row in zip(d["results"], rows):
    assert r["size"] == int(row[0]) and r["count"] == int(row[1]) and r["type"] == "float" and r["redop"] == "none"
    for mode, col in (("out_of_place", 5), ("in_place", 9)):
        m = r[mode]
        assert m["nwrong"] is None, m
        assert abs(m["time"] - float(row[col])) <= 0.01 * float(row[col]) + 0.01, (m, row)
        assert abs(m["bus_bw"] - m["alg_bw"] / 2) < 1e-12, m
assert d["out_of_bounds"] == {"count": 0, "okay": True}, d["out_of_bounds"]
EOF

# --- braid_perf alltoall -b 0: the test is named alltoall_perf (as nccl-tests, whatever started it), one row of
# size 0, in-place #wrong N/A.
expect_rc 0 "braid_perf alltoall -b 0" -- "$bin/braid_perf" alltoall -b 0 -e 64 -f 2 -t 2 -n 1
sed -n 2p "$tmp/out" | grep -qx '# Collective test starting: alltoall_perf' && ok || fail "alltoall line 2: $(sed -n 2p "$tmp/out")"
tail -1 "$tmp/out" | grep -qx '# Collective test concluded: alltoall_perf' && ok || fail "alltoall last line: $(tail -1 "$tmp/out")"
[ "$(rows "$tmp/out" | awk '{print $1}' | tr '\n' ' ')" = "0 32 64 " ] && ok ||
  fail "alltoall -b 0 sizes: $(rows "$tmp/out" | awk '{print $1}' | tr '\n' ' ')"
check_rows "alltoall -b 0" "$tmp/out" 'NF == 13 && $9 == 0 && $13 == "N/A"'

# --- alltoall with 2DH forced (BRAID_ALLTOALL=2dh, 2 nodes of 2 ranks): the 2dh algorithm runs and every result
# element is right, on threads and on 2 processes.
for procs in "-t 4" "-p 2 -t 2"; do
  expect_rc 0 "alltoall 2dh $procs" -- env BRAID_ALLTOALL=2dh BRAID_RANKS_PER_NODE=2 BRAID_DEBUG=INFO \
    "$bin/alltoall_perf" -b 1K -e 1M -f 32 $procs -n 2
  check_rows "alltoall 2dh $procs" "$tmp/out" 'NF == 13 && $9 == 0'
  grep -q "alltoall 1024 B out-of-place -> 2dh_alltoall_n4" "$tmp/err" && ok || fail "alltoall 2dh $procs: $(grep INFO "$tmp/err" | head -3)"
done

# --- -J into a folder that does not exist: refused before the sweep in the braid CLI's words and exit status (1: an
# output that cannot be written), nothing printed on stdout; an empty -J is a bad flag (2).
expect_rc 1 "-J /nonexistent" -- "$bin/all_reduce_perf" -b 8 -e 8 -t 2 -J "$tmp/nonexistent/x.json"
grep -qxF -- "all_reduce_perf: cannot write $tmp/nonexistent/x.json: directory $tmp/nonexistent does not exist" \
  "$tmp/err" && ok || fail "-J message: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] && ok || fail "-J: the sweep ran: $(head -3 "$tmp/out")"
expect_rc 2 "-J ''" -- "$bin/all_reduce_perf" -b 8 -e 8 -t 2 -J ""
grep -qF -- "-J: an empty path names no file to write" "$tmp/err" && ok || fail "-J '': $(cat "$tmp/err")"
# An --algo file that does not load is named with the reason in the braid CLI's words, without a status-code name.
printf '<algo name="x"/>\n' >"$tmp/bad.xml"
"$bin/all_reduce_perf" -b 8 -e 8 -t 2 --algo "$tmp/bad.xml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -ne 0 ] && ok || fail "--algo a malformed file: exit 0"
grep -qF "bad.xml:1: <algo> attribute 'proto': missing (required)" "$tmp/err" && ok || fail "--algo bad.xml: $(head -2 "$tmp/err")"
grep -q "parse error\|kParse" "$tmp/err" && fail "--algo bad.xml: a status-code name: $(head -2 "$tmp/err")" || ok
# A truncated file with 8 ranks: the error names the file given (not braid_perf's temporary copy) and is printed once,
# before any rank starts; the same for a file that loads but does not verify (rank 1 never receives rank 0's chunk).
printf '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="8" ngpus="8" coll="allreduce" inplace="1">\n <gpu id="0"' \
  >"$tmp/trunc.xml"
expect_rc 1 "--algo a truncated file" -- "$bin/all_reduce_perf" -b 8 -e 8 -t 8 --algo "$tmp/trunc.xml"
grep -qF "all_reduce_perf: --algo: $tmp/trunc.xml:" "$tmp/err" && ok || fail "--algo trunc.xml: $(head -2 "$tmp/err")"
grep -q "braid_perf_algo" "$tmp/err" && fail "--algo trunc.xml names the temporary copy: $(head -2 "$tmp/err")" || ok
[ "$(grep -c "trunc.xml" "$tmp/err")" -eq 1 ] && ok || fail "--algo trunc.xml: printed $(grep -c "trunc.xml" "$tmp/err") times"
cat >"$tmp/unverified.xml" <<'XML'
<algo name="unverified" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0"></gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0"></gpu>
</algo>
XML
expect_rc 1 "--algo a file that does not verify" -- "$bin/all_gather_perf" -b 8 -e 8 -t 2 --algo "$tmp/unverified.xml"
grep -qF "all_gather_perf: --algo: $tmp/unverified.xml: algorithm 'unverified' does not verify" "$tmp/err" && ok ||
  fail "--algo unverified.xml: $(head -2 "$tmp/err")"
[ "$(grep -c "does not verify" "$tmp/err")" -eq 1 ] && ok ||
  fail "--algo unverified.xml: the verifier's report printed $(grep -c "does not verify" "$tmp/err") times"
# A report that fails when written at the end says what failed in words, without a status-code name.
if [ -c /dev/full ] && [ -w /dev/full ]; then
  expect_rc 1 "-J /dev/full" -- "$bin/all_reduce_perf" -b 8 -e 8 -t 1 -J /dev/full
  grep -qF -- "-J /dev/full: write failed" "$tmp/err" && ok || fail "-J /dev/full: $(cat "$tmp/err")"
  grep -q "system error\|invalid argument\|k[A-Z][a-zA-Z]*Error\|kInvalid" "$tmp/err" &&
    fail "-J /dev/full: a status-code name: $(cat "$tmp/err")" || ok
else
  skip "no writable /dev/full"
fi

# --- --algo FILE forces an algorithm written by `braid algo`.
if "$braid" algo recursive --coll allreduce -n 4 -o "$tmp/rec.xml" >/dev/null 2>&1; then
  BRAID_DEBUG=INFO expect_rc 0 "--algo FILE" -- "$bin/all_reduce_perf" -b 4K -e 4K -t 4 -n 2 --algo "$tmp/rec.xml"
  grep -q 'algorithms: forced from' "$tmp/out" && ok || fail "--algo not in the header"
  grep -q 'recursive_allreduce_n4 (BRAID_ALGO_DIR' "$tmp/err" && ok || fail "--algo: the file's algorithm did not run: $(grep INFO "$tmp/err" | head -2)"
  check_rows "--algo" "$tmp/out" '$9 == 0 && $13 == 0'
  # The header says where the file's algorithm runs: its size window and mode, or why it never runs.
  sed 's/inplace="1" outofplace="1" minBytes="0" maxBytes="[0-9]*"/inplace="0" outofplace="1" minBytes="2048" maxBytes="8191"/' \
    "$tmp/rec.xml" >"$tmp/win.xml"
  expect_rc 0 "--algo a windowed file" -- "$bin/all_reduce_perf" -b 1K -e 16K -t 4 -n 1 --algo "$tmp/win.xml"
  grep -qF "algorithms: $tmp/win.xml (sizes 2048 B..8191 B, out-of-place only) where it matches, else Braid's selection" \
    "$tmp/out" && ok || fail "--algo win.xml: $(grep 'Braid:' "$tmp/out")"
  expect_rc 0 "--algo a 4-rank file on 8 ranks" -- "$bin/all_reduce_perf" -b 1K -e 1K -t 8 -n 1 --algo "$tmp/rec.xml"
  grep -qF "algorithms: Braid's selection ($tmp/rec.xml: allreduce for 4 ranks, never this all_reduce with 8 ranks)" \
    "$tmp/out" && ok || fail "--algo rec.xml on 8 ranks: $(grep 'Braid:' "$tmp/out")"
  grep -q "braid_perf_algo" "$tmp/err" && fail "--algo rec.xml on 8 ranks names the temporary copy: $(cat "$tmp/err")" || ok
else
  fail "braid algo recursive --coll allreduce -n 4 failed"
fi

# --- --algo FILE's temporary directory is removed when SIGTERM ends the run; the exit status is the signal's.
if [ -f "$tmp/rec.xml" ]; then
  mkdir -p "$tmp/algotmp"
  TMPDIR="$tmp/algotmp" timeout 90 "$bin/all_reduce_perf" -b 4K -e 4K -t 4 -n 1000000 -c 0 --algo "$tmp/rec.xml" \
    >"$tmp/term.out" 2>"$tmp/term.err" &
  perf_pid=$!
  for _ in $(seq 200); do grep -q '^#        (B)' "$tmp/term.out" 2>/dev/null && break; sleep 0.1; done
  [ -n "$(ls "$tmp/algotmp")" ] && ok || fail "--algo: no temporary directory in \$TMPDIR while running"
  kill -TERM "$(pgrep -P $perf_pid | head -1)"
  wait $perf_pid
  rc=$?
  [ "$rc" -eq $((128 + 15)) ] && ok || fail "--algo then SIGTERM: exit $rc, want 143 (SIGTERM)"
  [ -z "$(ls "$tmp/algotmp")" ] && ok || fail "--algo then SIGTERM: left behind: $(ls "$tmp/algotmp")"
fi

# --- A process killed mid-run: the others report the lost peer, the parent names the signal, exit 1, no hang.
BRAID_TIMEOUT=20 timeout 90 "$bin/all_reduce_perf" -p 2 -b 4M -e 4M -n 1000000 -c 0 >"$tmp/kill.out" 2>"$tmp/kill.err" &
launcher=$!
for _ in $(seq 200); do grep -q '^#        (B)' "$tmp/kill.out" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
victim=$(pgrep -P "$(pgrep -P $launcher | head -1)" | tail -1)
if [ -n "$victim" ]; then
  kill -9 "$victim"
  wait $launcher
  rc=$?
  [ "$rc" -eq 1 ] && ok || fail "killed process: exit $rc, want 1: $(head -3 "$tmp/kill.err")"
  grep -q 'ended by signal 9' "$tmp/kill.err" && ok || fail "killed process: no signal report: $(head -3 "$tmp/kill.err")"
  grep -q 'braidAllReduce(count 1048576, float, sum, out of place) failed' "$tmp/kill.err" && ok ||
    fail "killed process: the survivor did not report its failed call: $(head -3 "$tmp/kill.err")"
else
  kill $launcher 2>/dev/null
  fail "killed process: no child process of braid_perf found"
fi

# --- Usage errors exit 2 with a message; -h exits 0.
expect_rc 2 "unknown flag" -- "$bin/all_reduce_perf" --bogus
grep -q 'unknown option --bogus' "$tmp/err" && ok || fail "unknown flag message: $(cat "$tmp/err")"
expect_rc 2 "-g 2" -- "$bin/all_reduce_perf" -g 2
grep -q -- '-g must be 1' "$tmp/err" && ok || fail "-g message: $(cat "$tmp/err")"
expect_rc 2 "-p 3 --transport threads" -- timeout 20 "$bin/all_reduce_perf" -p 3 --transport threads
grep -q -- '-p 3 with --transport threads' "$tmp/err" && ok || fail "-p with threads message: $(head -2 "$tmp/err")"
expect_rc 2 "bad number" -- "$bin/all_gather_perf" -n x
expect_rc 2 "-b above -e" -- "$bin/all_gather_perf" -b 2M -e 1M
expect_rc 2 "no collective" -- "$bin/braid_perf" -b 8
expect_rc 2 "root out of range" -- "$bin/broadcast_perf" -t 2 -r 5
expect_rc 2 "--algo missing" -- "$bin/all_reduce_perf" --algo "$tmp/nope.xml"
expect_rc 0 "-h" -- "$bin/reduce_perf" -h
grep -q 'parallel_init' "$tmp/out" && grep -q -- '--transport' "$tmp/out" && ok || fail "-h text"
[ ! -s "$tmp/err" ] && ok || fail "-h wrote to stderr"

finish
