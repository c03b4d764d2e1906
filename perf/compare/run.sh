#!/usr/bin/env bash
# Braid vs Open MPI vs Gloo, side by side (docs/performance.md): builds braid_compare if needed, then runs it
# under mpirun at each rank count of RANKS (default "2 4"). Extra arguments go to braid_compare (--help lists
# them), e.g. `perf/compare/run.sh --colls all_reduce -e 16M --markdown`.
#
# Environment:
#   BRAID_BUILD_DIR  build folder (default build); braid_compare is built there when missing
#   RANKS            rank counts to run, e.g. "2" or "2 4 8" (default "2 4")
#   MPIRUN_ARGS      replaces the default mpirun options below
#   NICE             run at this nice value (e.g. -10 as root, so builds on a shared machine disturb less)
#   MODE             which comparison (default all):
#                      all           Open MPI, Gloo and Braid with their defaults (Braid: shared memory)
#                      tcp           like for like over TCP: Braid with BRAID_TRANSPORT=tcp beside Gloo (TCP over
#                                    127.0.0.1), --libs gloo,braid
#                      keep-memory   Open MPI beside Braid with glibc keeping freed memory
#                                    (MALLOC_MMAP_THRESHOLD_=1 GiB, MALLOC_TRIM_THRESHOLD_=4 GiB), so Open MPI's
#                                    per-call temporary buffer is not faulted in afresh on every call; the table's
#                                    flt/call columns show the page faults that remain. --libs mpi,braid
#                      like-for-like tcp, then keep-memory, at each rank count
#                    Arguments given to run.sh come after the mode's, so e.g. --libs overrides it.
#
# mpirun options, and why:
#   --oversubscribe          more ranks than cores (4 ranks on CI's 2 cores)
#   --allow-run-as-root      CI runs as root
#   --bind-to none           Open MPI binds each process to one core by default (up to 2 ranks). Gloo's TCP
#                            event-loop thread inherits that binding and keeps its core busy during calls, so the
#                            calling thread waits for scheduler time slices: ~4 ms per 1 KiB all-reduce here
#                            instead of 0.4-3 ms unbound. Unbound, all three libraries get the same cores.
#   --mca btl self,vader     Open MPI's shared-memory transport (vader, single copy through CMA) only
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BRAID_BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/braid_compare"
if [ ! -x "$BIN" ]; then
  if [ ! -f "$BUILD_DIR/build.ninja" ] && [ ! -f "$BUILD_DIR/Makefile" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$BUILD_DIR" --target braid_compare -j "${BRAID_JOBS:-$(nproc)}"
fi
if [ ! -x "$BIN" ]; then
  echo "run.sh: $BIN was not built (perf/compare needs MPI and Gloo: libopenmpi-dev, libgloo-dev)" >&2
  exit 1
fi

read -r -a mpirun_args <<<"${MPIRUN_ARGS:---oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader}"
prefix=()
if [ -n "${NICE:-}" ]; then prefix=(nice -n "$NICE"); fi

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
  "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); $(mpirun --version | head -1)"
# mode_args MODE: the mpirun options (-x ...) and braid_compare options of one comparison, as two lines.
mode_args() {
  case $1 in
    all) printf '\n\n' ;;
    tcp) printf '%s\n%s\n' "-x BRAID_TRANSPORT=tcp" "--libs gloo,braid" ;;
    keep-memory)
      printf '%s\n%s\n' "-x MALLOC_MMAP_THRESHOLD_=1073741824 -x MALLOC_TRIM_THRESHOLD_=4294967296" "--libs mpi,braid"
      ;;
    *) return 1 ;;
  esac
}
MODE=${MODE:-all}
case $MODE in
  like-for-like) modes=(tcp keep-memory) ;;
  all | tcp | keep-memory) modes=("$MODE") ;;
  *)
    echo "run.sh: MODE=$MODE: one of all, tcp, keep-memory, like-for-like" >&2
    exit 2
    ;;
esac
status=0
for n in ${RANKS:-2 4}; do
  for m in "${modes[@]}"; do
    { read -r mpi_extra; read -r bin_extra; } < <(mode_args "$m")
    read -r -a mpi_extra_args <<<"$mpi_extra"
    read -r -a bin_extra_args <<<"$bin_extra"
    echo
    echo "# MODE=$m; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# mpirun -np $n ${mpirun_args[*]} ${mpi_extra_args[*]} $BIN ${bin_extra_args[*]} $*"
    "${prefix[@]}" mpirun -np "$n" "${mpirun_args[@]}" "${mpi_extra_args[@]}" "$BIN" "${bin_extra_args[@]}" "$@" ||
      status=$?
  done
done
exit $status
