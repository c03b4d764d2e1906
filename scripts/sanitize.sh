#!/usr/bin/env bash
# Sanitizer builds of the multirank tests (transports, bootstrap, communicator, NCCL plugins: transport_tests,
# comm_tests and nccl_tests, ctest label "multirank"):
#   build-asan: Debug at -O1, -fsanitize=address,undefined (UBSan halts on the first error)
#   build-tsan: Debug at -O1, -fsanitize=thread (halts on the first race report)
# -O1 is what the sanitizers' documentation recommends for usable speed (the simulations behind the tuner's tests run
# several times faster than at -O0) with full reports.
# Usage: scripts/sanitize.sh [asan|tsan|all] [extra ctest arguments, e.g. -R Tcp]
# Environment: BRAID_JOBS (build and ctest parallelism, default nproc), BRAID_SANITIZE_DIR (where build-asan
# and build-tsan go, default the repository root). Exit status: non-zero when a build or a test fails.
#
# Both build without CUDA (BRAID_WITH_CUDA=OFF): the CUDA runtime and NCCL are not instrumented, and the CPU half of
# runtime/cuda is covered by the test suite itself.
#
# Forked ranks report sanitizer errors through their exit status (the harness in tests/transport/multirank.h
# prints their output), so *_OPTIONS make every sanitizer stop at its first report.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
which="${1:-all}"
shift || true
jobs="${BRAID_JOBS:-$(nproc)}"
out="${BRAID_SANITIZE_DIR:-$root}"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"

run_one() {
  local name="$1" flags="$2"
  shift 2
  local dir="$out/build-$name"
  local start=$SECONDS
  echo "== $name: configure $dir ($flags)"
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="$flags -O1 -fno-omit-frame-pointer" -DBRAID_BUILD_PERF=OFF -DBRAID_WITH_CUDA=OFF \
    >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  echo "== $name: build transport_tests comm_tests nccl_tests"
  ninja -C "$dir" -j "$jobs" transport_tests comm_tests nccl_tests || return 1
  local built=$SECONDS
  # TSan needs a memory layout that some kernels' ASLR (mmap_rnd_bits > 28) breaks: run without ASLR then.
  local prefix=()
  if [[ "$name" == tsan ]] && command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    prefix=(setarch "$(uname -m)" -R)
  fi
  # UCX's libucm patches madvise(), which glibc calls while a thread exits; under TSan the patched call
  # crashes (ucm_event_enter -> TSan's rwlock interceptor). Without mmap hooks UCX works as before here.
  local env_vars=()
  if [[ "$name" == tsan ]]; then env_vars=(env UCX_MEM_MMAP_HOOK_MODE=none); fi
  echo "== $name: ctest -L multirank"
  local status=0
  "${env_vars[@]}" "${prefix[@]}" ctest --test-dir "$dir" -L multirank --output-on-failure -j "$jobs" "$@" ||
    status=$?
  echo "== $name: build $((built - start)) s, tests $((SECONDS - built)) s, ctest exit status $status"
  return "$status"
}

case "$which" in
  asan) run_one asan "-fsanitize=address,undefined" "$@" ;;
  tsan) run_one tsan "-fsanitize=thread" "$@" ;;
  all)
    # Both run even when the first fails; the exit status says whether either failed.
    failed=0
    run_one asan "-fsanitize=address,undefined" "$@" || failed=1
    run_one tsan "-fsanitize=thread" "$@" || failed=1
    exit "$failed"
    ;;
  *)
    echo "usage: $0 [asan|tsan|all] [ctest arguments]" >&2
    exit 2
    ;;
esac
