#!/usr/bin/env bash
# shellcheck disable=SC2015  # "cond && ok || fail": ok never fails
# perf/device/run.sh's GPU path on a machine without a GPU: a stand-in nvidia-smi on PATH lists an H200, and a build
# folder of stand-in programs prints what the real ones print on a GPU (canned tables, gtest lines, NCCL's INFO lines
# into NCCL_DEBUG_FILE). Checks that the script reads them as it must: each ratio computed from the printed numbers
# and judged against its bar (both PASS and FAIL cases), a skipped GPU test failing part t, the plugin proof lines
# found, part c's side-by-side table, exit 1 when a bar is missed.
# usage: run_sh_gpu_path_test.sh SOURCE_DIR BUILD_DIR SHIM_STANDIN_SO
set -uo pipefail
src=$1
build=$2
shim_standin=$3
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/lib.sh" run-sh-gpu-test

fake="$tmp/build"
mkdir -p "$fake/bin" "$fake/lib" "$tmp/path"
cp "$build/lib/libnccl-net-braid.so" "$build/lib/libnccl-tuner-braid.so" "$fake/lib/"
cp "$shim_standin" "$fake/lib/libbraid_nccl.so"  # exports ncclAllReduce, as the shim does

cat >"$tmp/path/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "580.00.00" ;;
esac
EOF
cat >"$fake/bin/cuda_tests" <<'EOF'
#!/usr/bin/env bash
echo "[==========] 3 tests from 1 test suite ran. (10 ms total)"
echo "[  PASSED  ] 3 tests."
EOF
cat >"$fake/bin/transport_tests" <<EOF
#!/usr/bin/env bash
echo "\$*" >>"$tmp/transport_tests.args"
echo "[ RUN      ] Conformance/TransportConformance.SendRecv/cuda"
echo "/src/tests/transport/conformance_test.cc:40: Skipped"
echo "cuda transport: cudaGetDeviceCount: stand-in reason"
echo "[  SKIPPED ] Conformance/TransportConformance.SendRecv/cuda (0 ms)"
echo "[  PASSED  ] 0 tests."
echo "[  SKIPPED ] 1 test, listed below:"
echo "[  SKIPPED ] Conformance/TransportConformance.SendRecv/cuda"
EOF
cat >"$fake/bin/braid_cuda_benchmark" <<'EOF'
#!/usr/bin/env bash
[ "$*" = "--ranks 1" ] && exit 2
echo "# kernel bandwidth on NVIDIA H200, 268435456 bytes per buffer (GB/s of memory traffic; ratio to cudaMemcpyAsync)"
echo "cudaMemcpyAsync D2D              4000.0 GB/s   1.000"
echo "launchCopy                       3800.0 GB/s   0.950"
echo "launchReduce fp32 sum            3000.0 GB/s   0.750"
echo "launchReduce bf16 sum            3600.0 GB/s   0.900"
echo "# all-reduce 1024 B fp32 x 4 ranks, us per call (200 calls): device-resident vs host-driven; hierarchical = device-resident as 2 hosts of 2 and 2 ranks, proxies over tcp"
if [ -n "${STANDIN_HIERARCHICAL_FAILED:-}" ]; then
  echo "ring LL                  device-resident     12.00 us  hierarchical    failed us  host-driven    300.00 us  host/device   25.00"
  exit 1
fi
echo "ring LL                  device-resident     12.00 us  hierarchical     80.00 us  host-driven    300.00 us  host/device   25.00"
echo "ring Simple              device-resident     20.00 us  hierarchical     95.50 us  host-driven    250.00 us  host/device   12.50"
echo "recursive_doubling LL    device-resident     10.00 us  hierarchical     61.25 us  host-driven    400.00 us  host/device   40.00"
EOF
cat >"$fake/bin/braid_nccl_ranks" <<'EOF'
#!/usr/bin/env bash
[ "$1 $2" = "-n 1" ] && exit 2
log=${NCCL_DEBUG_FILE:-/dev/null}
log=${log//%h/host}
log=${log//%p/$$}
if [ -n "${BRAID_ALGO_DIR:-}" ]; then
  echo "braid INFO: shim: ncclAllReduce count 256 float sum out-of-place 4 ranks 1 KiB -> braid recursive_allreduce_n4 (BRAID_ALGO_DIR $BRAID_ALGO_DIR/recursive-allreduce-4.json, window [0 B, unlimited])" >&2
  echo "braid INFO: shim: ncclAllReduce count 8 float sum out-of-place 4 ranks 32 B -> NCCL (stand-in reason)" >&2
  t1=30.00 t2=90.00
elif [ -n "${LD_PRELOAD:-}" ]; then
  exit 9
else
  t1=40.00 t2=100.00
fi
case "${NCCL_NET_PLUGIN:-}" in
  braid)
    printf '%s\n' "host:1:2 [0] NCCL INFO NET/Plugin: Loaded net plugin Braid (v11)" \
      "host:1:2 [0] NCCL INFO Using network Braid" "host:1:2 [0] NCCL INFO TUNER/Plugin: Using Braid (v5)" >"$log"
    bw=(9.500 4.000 3.000) ;;
  *)
    echo "host:1:2 [0] NCCL INFO Using network Socket" >"$log"
    bw=(10.000 4.000 4.000) ;;
esac
echo "# braid_nccl_ranks: 4 ranks on GPU 0 (NVIDIA H200), NCCL 2.28.9, float32, out-of-place"
echo "# all_reduce (sum)"
echo "          1024          256  float    sum   $t1      0.026      0.038        0"
echo "          4096         1024  float    sum   $t2      0.041      0.061        0"
echo "# result all_reduce bytes=67108864 busbw=${bw[0]} avg_busbw=1.0 wrong=0"
echo "# result all_gather bytes=67108864 busbw=${bw[1]} avg_busbw=1.0 wrong=0"
echo "# result alltoall bytes=67108864 busbw=${bw[2]} avg_busbw=1.0 wrong=0"
echo "# all results checked: 0 wrong"
EOF
chmod +x "$tmp/path/nvidia-smi" "$fake/bin/"*

rc=0
PATH="$tmp/path:$PATH" timeout 100 bash "$src/perf/device/run.sh" --no-build --build-dir "$fake" --out "$tmp/o" \
  --timeout 90 >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
[ "$rc" = 1 ] && ok || fail "exit $rc, expected 1 (bars missed); $(tail -5 "$tmp/stderr")"
s="$tmp/o/summary.txt"
expect() { grep -q -- "$1" "$s" && ok || fail "summary lacks /$1/:"$'\n'"$(cat "$s")"; }
for suite in CudaKernels CudaDeviceExecutor CudaTransport; do
  expect "^part t cuda_tests $suite\*: PASS (\[  PASSED  \] 3 tests.)$"
done
expect "^part t transport_tests ClassicalPlansOnThreadsOfOneProcess/cuda: left out (1 GPU(s); its 3 ranks as threads"
grep -qx -- "--gtest_filter=\*/cuda:-\*ClassicalPlansOnThreadsOfOneProcess/cuda" "$tmp/transport_tests.args" && ok ||
  fail "transport_tests ran with $(cat "$tmp/transport_tests.args" 2>/dev/null), expected the one-GPU filter"
# The measured parts run first, the correctness suites after them.
[ "$(grep -n '^part c results' "$s" | cut -d: -f1)" -lt "$(grep -n -m1 '^part t ' "$s" | cut -d: -f1)" ] && ok ||
  fail "part t reported before part c:"$'\n'"$(cat "$s")"
expect "^part t transport_tests \*/cuda: FAIL (1 skipped, first: \[  SKIPPED \] Conformance/TransportConformance.SendRecv/cuda (0 ms): cuda transport: cudaGetDeviceCount: stand-in reason; a skip"
expect "^part a launchCopy at 256 MiB: 3800.0 GB/s vs cudaMemcpyAsync 4000.0 GB/s (0.79 of the 4800 GB/s datasheet peak); ratio: 0.950 (bar >= 0.80) PASS$"
expect "^part a launchReduce fp32 sum at 256 MiB: .*ratio: 0.750 (bar >= 0.80) FAIL$"
expect "^part a launchReduce bf16 sum at 256 MiB: .*ratio: 0.900 (bar >= 0.80) PASS$"
expect "^part a 1 KiB all-reduce, 4 ranks: best host-driven 250.00 us / best device-resident 10.00 us: 25.00 (bar >= 3) PASS$"
expect "^part a 1 KiB all-reduce, 4 ranks as 2 hosts x 2, hierarchical (device-resident in a host, proxies over tcp): best 61.25 us (device-resident 10.00 us, host-driven 250.00 us; reported, no bar)$"
expect "^part b NCCL through Braid's plugins: every result checked, 0 wrong: PASS$"
expect "^part b net plugin loaded: .*PASS$"
expect "^part b tuner plugin loaded: .*PASS$"
expect "^part b socket run used NCCL's socket transport"
expect "^part b all_reduce 67108864 B busbw: Braid net plugin 9.500 GB/s / NCCL socket 10.000 GB/s: 0.950 (bar >= 0.9) PASS$"
expect "^part b all_gather 67108864 B busbw: .*: 1.000 (bar >= 0.9) PASS$"
expect "^part b alltoall 67108864 B busbw: Braid net plugin 3.000 GB/s / NCCL socket 4.000 GB/s: 0.750 (bar >= 0.9) FAIL$"
expect "^part c results: plain NCCL and the shim both checked .*PASS$"
expect "^part c the shim ran the Braid algorithm: 1 log line(s) '-> braid recursive_allreduce_n4', 1 '-> NCCL': PASS$"
expect "^        1024      40.00      30.00     0.75$"
expect "^        4096     100.00      90.00     0.90$"
grep -q "skipped: no GPU" "$s" && fail "GPU path reported 'no GPU'" || ok
for f in run.log summary.txt t.log a.log b.log c.log cpu.log; do
  [ -s "$tmp/o/$f" ] && ok || fail "\$OUT lacks $f"
done
grep -q "Loaded net plugin Braid" "$tmp/o/b.log" && ok || fail "b.log does not keep NCCL's plugin lines"
[ "$(find "$tmp/o" -type f | wc -l)" -le 8 ] && ok || fail "more than 8 files in \$OUT (the device machine returns 8)"

# Part a alone with a benchmark whose hierarchical path failed (it prints `failed` in that column, exits 1): the
# device-resident / host-driven ratio is still judged, the failure and the missing figure are reported.
rc=0
PATH="$tmp/path:$PATH" STANDIN_HIERARCHICAL_FAILED=1 timeout 60 bash "$src/perf/device/run.sh" --no-build \
  --build-dir "$fake" --out "$tmp/o2" --parts a --timeout 50 >"$tmp/stdout2" 2>"$tmp/stderr2" || rc=$?
[ "$rc" = 1 ] && ok || fail "hierarchical failed: exit $rc, expected 1; $(tail -5 "$tmp/stderr2")"
s="$tmp/o2/summary.txt"
expect "^part a: braid_cuda_benchmark FAIL (status 1"
expect "^part a 1 KiB all-reduce, 4 ranks: best host-driven 300.00 us / best device-resident 12.00 us: 25.00 (bar >= 3) PASS$"
expect "^part a 1 KiB all-reduce, hierarchical (2 hosts x 2, proxies over tcp): no figure (failed or missing in a.log) FAIL$"

finish
