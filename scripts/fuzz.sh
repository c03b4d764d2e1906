#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang 14, ASan+UBSan) and runs them (fuzz/README.md).
#   scripts/fuzz.sh ci                      every target for BRAID_FUZZ_SECONDS (default 20) seconds
#   scripts/fuzz.sh long                    every target to BRAID_FUZZ_RUNS (default 1000000) executions
#   scripts/fuzz.sh TARGET [libFuzzer args] one target (e.g. nccl_xml -runs=100000, or nccl_xml crash-1234 to
#                                           reproduce a crash); "scripts/fuzz.sh list" names the targets
# Environment: BRAID_FUZZ_DIR (build folder, default build-fuzz at the repository root), BRAID_JOBS (build
# parallelism, default nproc). Each target's working corpus is $BRAID_FUZZ_DIR/corpus/TARGET (kept between runs),
# seeded from fuzz/seeds/TARGET.txt (globs), fuzz/seeds/TARGET/ and fuzz/regressions/TARGET/; a crash, leak, timeout
# or out-of-memory input lands in $BRAID_FUZZ_DIR/artifacts/TARGET/ and each run's output in
# $BRAID_FUZZ_DIR/logs/TARGET.log. Exit status: non-zero when the build fails or any target finds anything.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${BRAID_FUZZ_DIR:-$root/build-fuzz}"
jobs="${BRAID_JOBS:-$(nproc)}"
mode="${1:-ci}"
shift || true

targets=(topology_yaml nccl_xml nvidia_smi taccl_profile taccl_sketch sketch_yaml msccl_xml algorithm_json
  taccl_algorithm_json nccl_tests)
# Longest input each target is given (bytes): a little above its largest real input.
declare -A max_len=(
  [topology_yaml]=16384 [nccl_xml]=16384 [nvidia_smi]=4096 [taccl_profile]=4096 [taccl_sketch]=4096
  [sketch_yaml]=4096 [msccl_xml]=65536 [algorithm_json]=16384 [taccl_algorithm_json]=65536 [nccl_tests]=8192
)

if [[ "$mode" == list ]]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

build() {
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  if [[ ! -f "$dir/build.ninja" ]]; then
    echo "== fuzz: configure $dir (clang++-14, BRAID_FUZZ=ON)"
    mkdir -p "$dir"
    cmake -S "$root" -B "$dir" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++-14 -DBRAID_FUZZ=ON -DBRAID_BUILD_TESTS=OFF >"$dir/configure.log" 2>&1 ||
      { cat "$dir/configure.log"; return 1; }
  fi
  echo "== fuzz: build fuzz_all"
  ninja -C "$dir" -j "$jobs" fuzz_all
}

# run_target TARGET [libFuzzer args]: runs one target over its corpus; prints one summary line.
run_target() {
  local t="$1"
  shift
  local bin="$dir/bin/${t}_fuzz" corpus="$dir/corpus/$t" seeds="$dir/seeds/$t" artifacts="$dir/artifacts/$t/"
  local log="$dir/logs/$t.log"
  mkdir -p "$corpus" "$seeds" "$artifacts" "$dir/logs"
  # The manifest's files are copied (its globs are relative to the repository root; ../shared may be absent).
  local pattern f
  while read -r pattern; do
    pattern="${pattern%%#*}"
    pattern="${pattern//[[:space:]]/}"
    [[ -z "$pattern" ]] && continue
    for f in $root/$pattern; do
      [[ -f "$f" ]] && cp -f "$f" "$seeds/"
    done
  done <"$root/fuzz/seeds/$t.txt"
  local dirs=("$corpus" "$seeds") arg
  [[ -d "$root/fuzz/seeds/$t" ]] && dirs+=("$root/fuzz/seeds/$t")
  [[ -d "$root/fuzz/regressions/$t" ]] && dirs+=("$root/fuzz/regressions/$t")
  # Inputs named on the command line are replayed alone (libFuzzer runs files, not a corpus, then).
  for arg in "$@"; do [[ "$arg" != -* ]] && dirs=(); done
  local start=$SECONDS status=0
  "$bin" -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$t]}" -artifact_prefix="$artifacts" \
    -print_final_stats=1 "$@" "${dirs[@]}" >"$log" 2>&1 || status=$?
  local execs rate
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  printf '== fuzz: %-22s %10s executions %7s exec/s %5d s  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
    $((SECONDS - start)) "$([[ $status -eq 0 ]] && echo ok || echo "FAILED (exit $status, log $log)")"
  if [[ $status -ne 0 ]]; then
    grep -E "ERROR: |SUMMARY: |runtime error|Test unit written|ALARM|what\(\)" "$log" | head -20 || true
    return 1
  fi
}

build
failed=()
case "$mode" in
  ci)
    for t in "${targets[@]}"; do
      run_target "$t" -max_total_time="${BRAID_FUZZ_SECONDS:-20}" "$@" || failed+=("$t")
    done
    ;;
  long)
    for t in "${targets[@]}"; do
      run_target "$t" -runs="${BRAID_FUZZ_RUNS:-1000000}" "$@" || failed+=("$t")
    done
    ;;
  *)
    if [[ -z "${max_len[$mode]:-}" ]]; then
      echo "fuzz.sh: unknown target or mode '$mode' (ci, long, list, or one of: ${targets[*]})" >&2
      exit 2
    fi
    run_target "$mode" "$@" || failed+=("$mode")
    ;;
esac
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "== fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzz: all targets clean"
