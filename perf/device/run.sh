#!/usr/bin/env bash
# perf/device/run.sh: the GPU checks and measurements of docs/gpu.md ("Device script") as one timed script.
#
#   a  braid_cuda_benchmark: copy / reduce kernels vs cudaMemcpyAsync at 256 MiB (bar: >= 0.80 of the memcpy's
#      GB/s), and the 1 KiB fp32 all-reduce on 4 ranks device-resident vs host-driven (bar: host/device >= 3), with
#      the hierarchical path (4 ranks as 2 named hosts x 2, proxies over tcp) beside them (reported, no bar)
#   b  real NCCL, 4 rank processes on the one GPU with an NCCL_HOSTID each (braid_nccl_ranks): all_reduce,
#      all_gather, alltoall through NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid, then through NCCL's own socket
#      transport in the same run (4 KiB .. 16 MiB); every element checked; NCCL's INFO lines proving both plugins
#      loaded; busbw ratio (bar: Braid's net plugin >= 0.9 x socket at the largest size of every collective)
#   c  the NCCL-API shim (build/lib/libbraid_nccl.so, LD_PRELOAD) running a Braid algorithm (BRAID_ALGO_DIR) under
#      braid_nccl_ranks, against plain NCCL in the same run; both checked element by element
#   t  correctness, after the measured parts: cuda_tests' Cuda* suites (ctest's label gpu) and transport_tests'
#      */cuda, each suite its own step (a skip is a failure: it means CUDA or NCCL did not start; the one test that
#      needs a GPU per rank is left out by name on a machine with fewer than 3)
#
# Without a GPU (nvidia-smi missing, or it lists none), or with --cpu-check, it does what a CPU machine can: build
# (or check --build-dir), the plugin libraries and their exports, loading them by NCCL's name rules, the drivers'
# argument handling and their clean no-GPU failure; each GPU part then reads "skipped: no GPU (<reason>)".
#
# Output: ${OUT:-perf/device/out}/ (or --out DIR): run.log (everything), summary.txt, and one log per part
# (t.log, a.log, b.log, c.log, cpu.log). Exit status: 0 nothing failed, 1 a check failed or a bar was missed,
# 2 bad arguments.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
  cat <<'EOF'
usage: perf/device/run.sh [--cpu-check] [--parts t,a,b,c] [--build-dir DIR] [--no-build] [--lib-dir DIR]
                          [--timeout S] [--out DIR] [--help]
  --cpu-check      do only what runs without a GPU (automatic when nvidia-smi lists no GPU)
  --parts LIST     parts to run, comma-separated (default t,a,b,c)
  --build-dir DIR  build folder (default build-device in the repository root)
  --no-build       use --build-dir as it is (a carried or earlier build); no configure, no compile
  --lib-dir DIR    a folder of shared libraries the build needs, put first on LD_LIBRARY_PATH (a carried build's);
                   its NAME.gz files (pack.sh's compressed libraries) are expanded to NAME there first
  --timeout S      seconds for the whole script, every step included (default 290)
  --out DIR        results folder (default $OUT, else perf/device/out)
exit: 0 nothing failed, 1 a check failed or a bar was missed, 2 bad arguments
EOF
}

cpu_check=0
parts="t,a,b,c"
build_dir="$ROOT/build-device"
no_build=0
lib_dir=""
total_timeout=290
out_dir="${OUT:-$ROOT/perf/device/out}"
while [ $# -gt 0 ]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --cpu-check) cpu_check=1 ;;
    --no-build) no_build=1 ;;
    --parts | --build-dir | --lib-dir | --timeout | --out)
      if [ $# -lt 2 ] || [ -z "$2" ]; then echo "run.sh: $1 needs a value" >&2; usage >&2; exit 2; fi
      if [[ "$2" == --* ]]; then
        echo "run.sh: $1 needs a value, got the option '$2' (a value may not start with --)" >&2
        usage >&2
        exit 2
      fi
      case "$1" in
        --parts) parts=$2 ;;
        --build-dir) build_dir=$2 ;;
        --lib-dir) lib_dir=$2 ;;
        --timeout) total_timeout=$2 ;;
        --out) out_dir=$2 ;;
      esac
      shift ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$total_timeout" =~ ^[0-9]+$ ]] || [ "$total_timeout" -lt 10 ]; then
  echo "run.sh: --timeout must be a whole number of seconds >= 10, got '$total_timeout'" >&2
  exit 2
fi
want_t=0 want_a=0 want_b=0 want_c=0
IFS=',' read -r -a part_list <<<"$parts"
[ ${#part_list[@]} -gt 0 ] || { echo "run.sh: --parts is empty" >&2; exit 2; }
for p in "${part_list[@]}"; do
  case "$p" in
    t) want_t=1 ;; a) want_a=1 ;; b) want_b=1 ;; c) want_c=1 ;;
    *) echo "run.sh: unknown part '$p' in --parts (t, a, b, c)" >&2; exit 2 ;;
  esac
done
if [ "$no_build" = 1 ] && [ ! -d "$build_dir" ]; then
  echo "run.sh: --no-build: build folder $build_dir does not exist" >&2
  exit 2
fi
if [ -n "$lib_dir" ] && [ ! -d "$lib_dir" ]; then
  echo "run.sh: --lib-dir $lib_dir does not exist" >&2
  exit 2
fi
case "$build_dir" in /*) ;; *) build_dir="$PWD/$build_dir" ;; esac
case "$out_dir" in /*) ;; *) out_dir="$PWD/$out_dir" ;; esac
mkdir -p "$out_dir"
work=$(mktemp -d /tmp/braid-device.XXXXXX)
trap 'rm -rf "$work"' EXIT

START=$SECONDS
LOG="$out_dir/run.log"
SUMMARY="$out_dir/summary.txt"
: >"$LOG"
: >"$SUMMARY"
failures=0

log() { echo "$*" | tee -a "$LOG"; }
# summary LINE: one line of the summary (also in the log).
summary() { echo "$*" >>"$SUMMARY"; log "SUMMARY: $*"; }
fail_summary() { summary "$*"; failures=$((failures + 1)); }
remaining() { echo $((total_timeout - (SECONDS - START))); }
# run_step CAP LOGFILE CMD...: CMD under `timeout` (min(CAP, time left)), output to LOGFILE and run.log; returns
# CMD's status (124 when it timed out, 125 when no time was left to start it); step_cut=1 when the time left, not
# CAP, bounded it.
run_step() {
  local cap=$1 file=$2
  shift 2
  local left
  left=$(remaining)
  step_cut=0
  if [ "$left" -lt "$cap" ]; then cap=$left; step_cut=1; fi
  if [ "$cap" -le 2 ]; then
    echo "run.sh: no time left for: $*" | tee -a "$file" "$LOG" >&2
    return 125
  fi
  echo "+ [${cap}s] $*" | tee -a "$file" >>"$LOG"
  local rc=0
  timeout --kill-after=5 "$cap" "$@" 2>&1 | tee -a "$file" >>"$LOG" || rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "run.sh: timed out after ${cap}s: $*" | tee -a "$file" "$LOG" >&2
  return "$rc"
}

log "# perf/device/run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), repository $ROOT"
log "# build $build_dir, results $out_dir, timeout ${total_timeout}s, parts $parts"

# --- The machine: is there a GPU? ------------------------------------------------------------------------------
gpu_reason=""
gpu_count=0
if ! command -v nvidia-smi >/dev/null 2>&1; then
  gpu_reason="nvidia-smi not found"
elif ! smi_out=$(timeout 30 nvidia-smi -L 2>&1); then
  gpu_reason="nvidia-smi -L failed: $(echo "$smi_out" | head -1)"
elif ! echo "$smi_out" | grep -q '^GPU '; then
  gpu_reason="nvidia-smi -L lists no GPU"
else
  gpu_count=$(echo "$smi_out" | grep -c '^GPU ')
  log "$smi_out"
  log "driver $(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
fi
if [ "$cpu_check" = 1 ] && [ -z "$gpu_reason" ]; then gpu_reason="--cpu-check"; fi
if [ -n "$gpu_reason" ]; then
  cpu_check=1
  log "# CPU check only: $gpu_reason"
fi
command -v nvcc >/dev/null 2>&1 && log "nvcc: $(nvcc --version | tail -1)"

# --- Build ---------------------------------------------------------------------------------------------------
targets=(braid_nccl_ranks nccl-net-braid nccl-tuner-braid)
[ "$want_t" = 1 ] && targets+=(cuda_tests transport_tests)
[ "$want_a" = 1 ] && targets+=(braid_cuda_benchmark)
if [ "$no_build" = 0 ]; then
  configure_rc=0 build_rc=0
  run_step "$(remaining)" "$out_dir/build.log" cmake -S "$ROOT" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBRAID_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 || configure_rc=$?
  if [ "$configure_rc" = 0 ] && [ "$want_c" = 1 ] &&
    ninja -C "$build_dir" -t targets all 2>/dev/null | grep -q '^braid_nccl:'; then
    targets+=(braid_nccl)
  fi
  if [ "$configure_rc" = 0 ]; then
    run_step "$(remaining)" "$out_dir/build.log" cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}" ||
      build_rc=$?
  fi
  if [ "$configure_rc" = 124 ] || [ "$build_rc" = 124 ]; then
    fail_summary "build: FAIL (out of time: --timeout $total_timeout; build.log)"
  elif [ "$configure_rc" != 0 ]; then
    fail_summary "build: FAIL (configure, status $configure_rc; build.log names what is missing). A machine without Braid's dependencies (scripts/install-deps.sh) and no package registry cannot configure: pack a build elsewhere (perf/device/pack.sh) and run with --no-build --build-dir <it> --lib-dir <it>/deps (docs/gpu.md)"
  elif [ "$build_rc" != 0 ]; then
    fail_summary "build: FAIL (compile, status $build_rc; build.log)"
  else
    summary "build: ok ($build_dir, CUDA architecture 90)"
  fi
fi

bin="$build_dir/bin"
lib="$build_dir/lib"
# libnccl.so.2 and libcudart.so.13: where the loader finds them, else the CUDA toolkit's folder or a Python wheel's
# (nvidia-nccl-cu13, nvidia-cuda-runtime) folder.
find_lib_dir() {
  ldconfig -p 2>/dev/null | grep -q " $1 " && return 0
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
    [ -d "$d" ] || continue
    local hit
    hit=$(find "$d" -maxdepth 3 -name "$1" -print -quit 2>/dev/null)
    if [ -n "$hit" ]; then dirname "$hit"; return 0; fi
  done
}
extra_dirs=""
for so in libnccl.so.2 libcudart.so.13; do
  d=$(find_lib_dir "$so")
  [ -n "$d" ] && case ":$extra_dirs:" in *":$d:"*) ;; *) extra_dirs="$extra_dirs:$d" ;; esac
done
export LD_LIBRARY_PATH="${lib_dir:+$lib_dir:}$lib$extra_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
# A pack (perf/device/pack.sh) holds a library over 8 MiB (libz3, for the shim's Pareto companion) gzip-compressed in
# its deps folder: each NAME.gz is expanded beside itself to NAME, unless NAME is already there and not older.
if [ -n "$lib_dir" ]; then
  for gz in "$lib_dir"/*.gz; do
    [ -e "$gz" ] || continue
    so=${gz%.gz}
    if [ -e "$so" ] && [ ! "$gz" -nt "$so" ]; then continue; fi
    if gzip -dc "$gz" >"$so.partial" 2>>"$LOG" && mv -f "$so.partial" "$so"; then
      log "expanded $gz"
    else
      rm -f "$so.partial"
      fail_summary "deps: FAIL (cannot expand $gz into $lib_dir)"
    fi
  done
fi

# need FILE...: true when every file exists; a FAIL line names the missing ones.
need() {
  local what=$1 missing=()
  shift
  for f in "$@"; do [ -e "$f" ] || missing+=("$f"); done
  if [ ${#missing[@]} -gt 0 ]; then
    fail_summary "$what: FAIL (not built: ${missing[*]})"
    return 1
  fi
  return 0
}
# unresolved FILE: the shared libraries the loader cannot find for FILE (empty when all resolve).
unresolved() { { ldd "$1" 2>/dev/null || true; } | awk '/not found/ {print $1}' | tr '\n' ' '; }

# --- Checks that need no GPU -----------------------------------------------------------------------------------
CPU_LOG="$out_dir/cpu.log"
net_so="$lib/libnccl-net-braid.so"
tuner_so="$lib/libnccl-tuner-braid.so"
shim_so="$lib/libbraid_nccl.so"
plugins_built=0
need "plugins" "$net_so" "$tuner_so" && plugins_built=1
if [ "$plugins_built" = 1 ] && ! command -v nm >/dev/null 2>&1; then
  summary "plugin exports: not checked (no nm on this machine)"
elif [ "$plugins_built" = 1 ]; then
  # Exactly NCCL's plugin tables are exported (docs/nccl.md).
  net_syms=$(nm -D --defined-only "$net_so" | awk '$2 ~ /^[A-Z]$/ && $2 != "A" {print $3}' | sort | tr '\n' ' ')
  tuner_syms=$(nm -D --defined-only "$tuner_so" | awk '$2 ~ /^[A-Z]$/ && $2 != "A" {print $3}' | sort | tr '\n' ' ')
  want_net="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v6 ncclNetPlugin_v7 ncclNetPlugin_v8 ncclNetPlugin_v9 ncclTunerPlugin_v2 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 "
  want_tuner="ncclTunerPlugin_v2 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 "
  echo "libnccl-net-braid.so exports: $net_syms" >>"$CPU_LOG"
  echo "libnccl-tuner-braid.so exports: $tuner_syms" >>"$CPU_LOG"
  if [ "$net_syms" = "$want_net" ] && [ "$tuner_syms" = "$want_tuner" ]; then
    summary "plugin exports: ok (net: ncclNetPlugin_v6..v11 + ncclTunerPlugin_v2..v5; tuner: ncclTunerPlugin_v2..v5; nothing else)"
  else
    fail_summary "plugin exports: FAIL (net exports '$net_syms', tuner exports '$tuner_syms'; cpu.log)"
  fi
fi
if [ "$plugins_built" = 1 ]; then
  # NCCL's name rule: NCCL_NET_PLUGIN=braid -> dlopen("libnccl-net-braid.so") through the loader's path.
  if command -v python3 >/dev/null 2>&1; then
    load_rc=0
    run_step 30 "$CPU_LOG" python3 -c '
import ctypes, sys
for lib, sym in (("libnccl-net-braid.so", "ncclNetPlugin_v11"), ("libnccl-tuner-braid.so", "ncclTunerPlugin_v5")):
    handle = ctypes.CDLL(lib, mode=ctypes.RTLD_LOCAL)
    getattr(handle, sym)
    print("dlopen(%s) by name: %s found" % (lib, sym))
' || load_rc=$?
    if [ "$load_rc" = 0 ]; then
      summary "plugins load by NCCL's names (libnccl-net-braid.so, libnccl-tuner-braid.so on LD_LIBRARY_PATH): ok"
    else
      fail_summary "plugins load by NCCL's names: FAIL (status $load_rc; cpu.log)"
    fi
  else
    summary "plugins load by NCCL's names: skipped (no python3 for the dlopen check)"
  fi
fi
if [ -e "$shim_so" ] && command -v nm >/dev/null 2>&1; then
  if nm -D --defined-only "$shim_so" | awk '{print $3}' | grep -qx ncclAllReduce; then
    summary "shim: $shim_so exports ncclAllReduce"
  else
    fail_summary "shim: FAIL ($shim_so does not export ncclAllReduce)"
  fi
fi
ranks_bin="$bin/braid_nccl_ranks"
# Every program and library the parts run resolves its shared libraries (a carried build needs --lib-dir); so does the
# shim's Pareto companion where it sits beside the shim (the shim dlopens it for BRAID_TOPOLOGY; pack.sh --with-pareto).
for f in "$ranks_bin" "$bin/braid_cuda_benchmark" "$bin/cuda_tests" "$bin/transport_tests" "$net_so" "$tuner_so" \
  "$shim_so" "$lib/libbraid_nccl_pareto.so"; do
  [ -e "$f" ] || continue
  missing_libs=$(unresolved "$f")
  [ -z "$missing_libs" ] || fail_summary "$(basename "$f"): FAIL (the loader cannot find: $missing_libs; --lib-dir)"
done
if need "braid_nccl_ranks" "$ranks_bin"; then
  usage_rc=0
  run_step 10 "$CPU_LOG" "$ranks_bin" -n 1 || usage_rc=$?
  if [ "$usage_rc" = 2 ]; then
    summary "braid_nccl_ranks -n 1: exit 2 (bad argument): ok"
  else
    fail_summary "braid_nccl_ranks -n 1: FAIL (exit $usage_rc, expected 2)"
  fi
  if [ "$gpu_reason" = "--cpu-check" ]; then
    summary "braid_nccl_ranks without a GPU: not checked (this machine has one; --cpu-check runs no collective)"
  elif [ "$cpu_check" = 1 ]; then
    nogpu_rc=0
    run_step 60 "$CPU_LOG" "$ranks_bin" -b 1K -e 1K || nogpu_rc=$?
    if [ "$nogpu_rc" = 3 ] && grep -q 'braid_nccl_ranks: no usable GPU' "$CPU_LOG"; then
      summary "braid_nccl_ranks without a GPU: exit 3, \"$(grep -m1 'braid_nccl_ranks: no usable GPU' "$CPU_LOG")\": ok"
    else
      fail_summary "braid_nccl_ranks without a GPU: FAIL (exit $nogpu_rc, expected 3 and 'no usable GPU'; cpu.log)"
    fi
  fi
fi
if [ "$want_a" = 1 ] && need "braid_cuda_benchmark" "$bin/braid_cuda_benchmark"; then
  bench_rc=0
  run_step 10 "$CPU_LOG" "$bin/braid_cuda_benchmark" --ranks 1 || bench_rc=$?
  if [ "$bench_rc" = 2 ]; then
    summary "braid_cuda_benchmark --ranks 1: exit 2 (bad argument): ok"
  else
    fail_summary "braid_cuda_benchmark --ranks 1: FAIL (exit $bench_rc, expected 2)"
  fi
fi

if [ "$cpu_check" = 1 ]; then
  for p in t a b c; do
    w=0
    case "$p" in t) w=$want_t ;; a) w=$want_a ;; b) w=$want_b ;; c) w=$want_c ;; esac
    [ "$w" = 1 ] && summary "part $p: skipped: no GPU ($gpu_reason)"
  done
  if [ "$want_c" = 1 ] && [ ! -e "$shim_so" ]; then summary "part c: shim not built ($shim_so)"; fi
  log "# $failures failure(s); $((SECONDS - START)) s"
  [ "$failures" = 0 ] && exit 0 || exit 1
fi

# ratio_check LABEL VALUE BAR: PASS when VALUE >= BAR.
ratio_check() {
  if awk -v v="$2" -v b="$3" 'BEGIN { exit !(v != "" && v + 0 >= b + 0) }'; then
    summary "$1: $2 (bar >= $3) PASS"
  else
    fail_summary "$1: ${2:-none} (bar >= $3) FAIL"
  fi
}

# --- Part a: kernel bandwidth, 1 KiB all-reduce device-resident vs host-driven (and hierarchical) -----------
if [ "$want_a" = 1 ] && [ -e "$bin/braid_cuda_benchmark" ]; then
  A="$out_dir/a.log"
  a_rc=0
  run_step 90 "$A" "$bin/braid_cuda_benchmark" --bytes 256M --small 1K --ranks 4 --iterations 200 || a_rc=$?
  [ "$a_rc" = 0 ] || fail_summary "part a: braid_cuda_benchmark FAIL (status $a_rc: a part failed or a result was wrong; a.log)"
  peak=${BRAID_HBM_PEAK_GBS:-4800}
  memcpy_gbs=$(awk '/^cudaMemcpyAsync D2D/ {print $3}' "$A")
  for k in "launchCopy" "launchReduce fp32 sum" "launchReduce bf16 sum"; do
    ratio=$(awk -v k="$k" 'index($0, k) == 1 {print $NF}' "$A")
    gbs=$(awk -v k="$k" 'index($0, k) == 1 {print $(NF-2)}' "$A")
    ratio_check "part a $k at 256 MiB: ${gbs:-?} GB/s vs cudaMemcpyAsync ${memcpy_gbs:-?} GB/s ($(awk -v g="$gbs" -v p="$peak" 'BEGIN { if (g != "") printf "%.2f", g / p; else printf "?" }') of the ${peak} GB/s datasheet peak); ratio" "$ratio" 0.80
  done
  # The best (smallest) number after column label $1 over the table's rows; empty when no row has a number there.
  best_after() {
    awk -v k="$1" '$1 != "#" && / device-resident .* host-driven / {
      for (i = 1; i < NF; i++) if ($i == k && $(i + 1) ~ /^[0-9.]+$/) print $(i + 1) }' "$A" | sort -g | head -1
  }
  best_device=$(best_after device-resident)
  best_host=$(best_after host-driven)
  best_hier=$(best_after hierarchical)
  speedup=$(awk -v h="$best_host" -v d="$best_device" 'BEGIN { if (h != "" && d > 0) printf "%.2f", h / d }')
  ratio_check "part a 1 KiB all-reduce, 4 ranks: best host-driven ${best_host:-?} us / best device-resident ${best_device:-?} us" "$speedup" 3
  # The hierarchical path (2 named hosts x 2 ranks, proxies over tcp): reported beside the two, no bar.
  if [ -n "$best_hier" ]; then
    summary "part a 1 KiB all-reduce, 4 ranks as 2 hosts x 2, hierarchical (device-resident in a host, proxies over tcp): best ${best_hier} us (device-resident ${best_device:-?} us, host-driven ${best_host:-?} us; reported, no bar)"
  else
    fail_summary "part a 1 KiB all-reduce, hierarchical (2 hosts x 2, proxies over tcp): no figure (failed or missing in a.log) FAIL"
  fi
fi

# --- Part b: real NCCL through Braid's net + tuner plugins vs NCCL's socket transport -----------------------
nccl_env=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV" NCCL_SOCKET_IFNAME=lo BRAID_NET_IF=lo)
sweep=(-n 4 -b 4K -e 16M -f 4 -w 3 -i 10 --timeout 70)
if [ "$want_b" = 1 ] && [ -e "$ranks_bin" ]; then
  B="$out_dir/b.log"
  mkdir -p "$work/b-braid" "$work/b-socket"
  braid_rc=0 socket_rc=0
  run_step 75 "$B" env "${nccl_env[@]}" NCCL_DEBUG_FILE="$work/b-braid/nccl.%h.%p.txt" NCCL_NET_PLUGIN=braid \
    NCCL_TUNER_PLUGIN=braid NCCL_NET=Braid "$ranks_bin" "${sweep[@]}" --label "NCCL_NET_PLUGIN=braid" || braid_rc=$?
  run_step 75 "$B" env "${nccl_env[@]}" NCCL_DEBUG_FILE="$work/b-socket/nccl.%h.%p.txt" NCCL_NET_PLUGIN=none \
    NCCL_TUNER_PLUGIN=none NCCL_NET=Socket "$ranks_bin" "${sweep[@]}" --label "NCCL_NET=Socket" || socket_rc=$?
  {
    echo "# NCCL INFO lines naming the network and the plugins (Braid run):"
    cat "$work"/b-braid/* 2>/dev/null | grep -E 'Loaded net plugin|TUNER/Plugin|Using network|NET/Braid|TUNER/Braid' | sort | uniq -c | head -40
    echo "# NCCL INFO lines naming the network (socket run):"
    cat "$work"/b-socket/* 2>/dev/null | grep -E 'Loaded net plugin|TUNER/Plugin|Using network' | sort | uniq -c | head -20
  } >>"$B"
  cat "$work"/b-braid/* "$work"/b-socket/* 2>/dev/null | grep -E 'WARN' | head -20 >>"$B" || true
  if [ "$braid_rc" = 0 ]; then summary "part b NCCL through Braid's plugins: every result checked, 0 wrong: PASS"
  else fail_summary "part b NCCL through Braid's plugins: FAIL (status $braid_rc; b.log)"; fi
  if [ "$socket_rc" = 0 ]; then summary "part b NCCL socket transport: every result checked, 0 wrong: PASS"
  else fail_summary "part b NCCL socket transport: FAIL (status $socket_rc; b.log)"; fi
  if cat "$work"/b-braid/* 2>/dev/null | grep -q 'Loaded net plugin Braid' &&
    cat "$work"/b-braid/* 2>/dev/null | grep -q 'Using network Braid'; then
    summary "part b net plugin loaded: NCCL logged 'Loaded net plugin Braid' and 'Using network Braid': PASS"
  else
    fail_summary "part b net plugin loaded: FAIL (no 'Loaded net plugin Braid' / 'Using network Braid' in NCCL's INFO lines; b.log)"
  fi
  if cat "$work"/b-braid/* 2>/dev/null | grep -q 'TUNER/Plugin: Using Braid'; then
    summary "part b tuner plugin loaded: NCCL logged 'TUNER/Plugin: Using Braid': PASS"
  else
    fail_summary "part b tuner plugin loaded: FAIL (no 'TUNER/Plugin: Using Braid' in NCCL's INFO lines; b.log)"
  fi
  if cat "$work"/b-socket/* 2>/dev/null | grep -q 'Using network Socket'; then
    summary "part b socket run used NCCL's socket transport ('Using network Socket')"
  else
    fail_summary "part b socket run: FAIL (no 'Using network Socket' in NCCL's INFO lines; b.log)"
  fi
  # The busbw of both runs at the largest size, per collective: "# result <coll> bytes=.. busbw=.. avg_busbw=..".
  for coll in all_reduce all_gather alltoall; do
    braid_bw=$(awk -v c="$coll" '/NCCL_NET_PLUGIN=braid/ {run=1} /NCCL_NET=Socket/ {run=2} run == 1 && $2 == "result" && $3 == c {sub("busbw=", "", $5); print $5}' "$B" | tail -1)
    socket_bw=$(awk -v c="$coll" '/NCCL_NET_PLUGIN=braid/ {run=1} /NCCL_NET=Socket/ {run=2} run == 2 && $2 == "result" && $3 == c {sub("busbw=", "", $5); print $5}' "$B" | tail -1)
    ratio=$(awk -v b="$braid_bw" -v s="$socket_bw" 'BEGIN { if (b != "" && s > 0) printf "%.3f", b / s }')
    largest=$(awk -v c="$coll" '$2 == "result" && $3 == c {sub("bytes=", "", $4); print $4}' "$B" | tail -1)
    ratio_check "part b $coll ${largest:-?} B busbw: Braid net plugin ${braid_bw:-?} GB/s / NCCL socket ${socket_bw:-?} GB/s" "$ratio" 0.9
  done
fi

# --- Part c: the shim running a Braid algorithm vs plain NCCL ------------------------------------------------
if [ "$want_c" = 1 ]; then
  C="$out_dir/c.log"
  if [ ! -e "$shim_so" ]; then
    summary "part c: shim not built ($shim_so), part (c) skipped"
  elif [ -e "$ranks_bin" ]; then
    mkdir -p "$work/algos"
    cp "$ROOT/perf/device/recursive-allreduce-4.json" "$work/algos/"
    c_sweep=(-n 4 -c all_reduce -b 1K -e 4M -f 4 -w 3 -i 10 --timeout 45)
    ref_rc=0 shim_rc=0
    run_step 50 "$C" env NCCL_SOCKET_IFNAME=lo "$ranks_bin" "${c_sweep[@]}" --label "plain NCCL" || ref_rc=$?
    run_step 50 "$C" env NCCL_SOCKET_IFNAME=lo LD_PRELOAD="$shim_so" BRAID_ALGO_DIR="$work/algos" BRAID_DEBUG=INFO \
      "$ranks_bin" "${c_sweep[@]}" --label "LD_PRELOAD=libbraid_nccl.so BRAID_ALGO_DIR=recursive-allreduce-4" ||
      shim_rc=$?
    if [ "$ref_rc" = 0 ] && [ "$shim_rc" = 0 ]; then
      summary "part c results: plain NCCL and the shim both checked against the host's values, 0 wrong: PASS"
    else
      fail_summary "part c results: FAIL (plain NCCL status $ref_rc, shim status $shim_rc; c.log)"
    fi
    # The shim logs one line per call shape and communicator: "... -> braid <name> (...)" or "... -> NCCL (<why>)".
    to_braid=$(grep -c -- '-> braid recursive_allreduce_n4' "$C" || true)
    to_nccl=$(grep -c -- '-> NCCL (' "$C" || true)
    if [ "$to_braid" -gt 0 ]; then
      summary "part c the shim ran the Braid algorithm: $to_braid log line(s) '-> braid recursive_allreduce_n4', $to_nccl '-> NCCL': PASS"
    else
      fail_summary "part c: FAIL (no '-> braid recursive_allreduce_n4' line in the shim's log; $to_nccl '-> NCCL' line(s), first: $(grep -m1 -- '-> NCCL (' "$C" || echo none); c.log)"
    fi
    # Side by side: µs per call at each size.
    awk '/plain NCCL/ {run=1} /LD_PRELOAD=/ {run=2} $1 ~ /^[0-9]+$/ && NF == 8 {t[run, $1] = $5; s[$1] = 1}
      END { printf "# all_reduce us per call: size plain-NCCL shim shim/NCCL\n";
            for (k in s) if ((1, k) in t && (2, k) in t) printf "%12d %10.2f %10.2f %8.2f\n", k, t[1, k], t[2, k], t[2, k] / t[1, k] }' \
      "$C" | sort -n | tee -a "$C" "$SUMMARY" >>"$LOG"
  fi
fi

# --- Part t: correctness on the GPU --------------------------------------------------------------------------
# After the measured parts, so that their bars get the time first; each suite is its own step with its own cap (the
# processes of one GPU are time-sliced by the driver, so the suites that fork ranks take longest). A suite that finds
# no time left reads "not run" and counts as a failure: rerun with --parts t.
# gtest_run NAME CAP BINARY FILTER: the tests pass and none skipped.
gtest_run() {
  local name=$1 cap=$2 binary=$3 filter=$4 rc=0 one="$work/gtest.txt"
  need "part t $name" "$binary" || return 0
  : >"$one"
  run_step "$cap" "$one" "$binary" --gtest_filter="$filter" || rc=$?
  cat "$one" >>"$out_dir/t.log"
  local skipped
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$one" || true)
  if [ "$rc" = 125 ]; then
    fail_summary "part t $name: not run (no time left of --timeout $total_timeout; rerun with --parts t)"
  elif [ "$rc" = 124 ] && [ "$step_cut" = 1 ]; then
    fail_summary "part t $name: cut short by the --timeout $total_timeout budget, not by its own ${cap} s cap (t.log; rerun with --parts t)"
  elif [ "$rc" != 0 ]; then
    fail_summary "part t $name: FAIL (status $rc; t.log)"
  elif [ "$skipped" != 0 ]; then
    # gtest prints "<file>:<line>: Skipped" and the test's reason on the next line.
    fail_summary "part t $name: FAIL ($skipped skipped, first: $(grep -m1 '^\[  SKIPPED \]' "$one"): $(grep -m1 -A1 ': Skipped$' "$one" | tail -n 1); a skip means CUDA or NCCL did not start)"
  elif ! grep -q '^\[  PASSED  \]' "$one"; then
    fail_summary "part t $name: FAIL (no test ran)"
  else
    summary "part t $name: PASS ($(grep -m1 '^\[  PASSED  \]' "$one"))"
  fi
}
if [ "$want_t" = 1 ]; then
  gtest_run "cuda_tests CudaKernels*" 60 "$bin/cuda_tests" 'CudaKernels*'
  gtest_run "cuda_tests CudaDeviceExecutor*" 120 "$bin/cuda_tests" 'CudaDeviceExecutor*'
  gtest_run "cuda_tests CudaTransport*" 90 "$bin/cuda_tests" 'CudaTransport*'
  # The conformance suite's ranks-as-threads test needs a GPU per rank (NCCL refuses two ranks of one process on
  # one GPU; the test skips naming that); with fewer than its 3 GPUs it is left out here by name, not as a skip.
  cuda_filter='*/cuda'
  if [ "$gpu_count" -lt 3 ]; then
    cuda_filter='*/cuda:-*ClassicalPlansOnThreadsOfOneProcess/cuda'
    summary "part t transport_tests ClassicalPlansOnThreadsOfOneProcess/cuda: left out ($gpu_count GPU(s); its 3 ranks as threads of one process need a GPU each)"
  fi
  gtest_run "transport_tests */cuda" 150 "$bin/transport_tests" "$cuda_filter"
fi

log "# $failures failure(s); $((SECONDS - START)) s"
[ "$failures" = 0 ] && exit 0 || exit 1
