#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then build and run a consumer project that uses find_package(braid):
#   - `consumer` links braid::braid_comm alone: it runs all-reduces (C API; C++ API with an algorithm written
#     offline by the installed CLI), and its link (the link line CMake wrote in build.ninja, the shared objects
#     ldd resolves, the symbols nm finds) names none of Z3, GLPK, CLP/CoinUtils, LEMON or Boost;
#   - `consumer_pareto` links braid::braid_pareto and computes a Pareto set; the same checks find Z3 there;
#   - the NCCL plugins are in the lib dir and export only ncclNetPlugin_v* / ncclTunerPlugin_v*, without Z3 or GLPK;
#   - `consumer_plugin` is a shared object linking Braid's static libraries, and no installed archive holds an
#     absolute (non-PIC) relocation.
set -euo pipefail
build_dir=$1
src_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/braid"
test -f "$prefix/include/braid/algorithm.h"
test -f "$prefix/include/braid/pareto.h"
test -f "$prefix/share/braid/topologies/dgx1-v100.yaml"
if [ -n "$(find "$prefix" -name 'libbraid_report*')" ]; then
  echo "FAIL: braid_report (the CLI's report library) is installed" >&2
  exit 1
fi
cmake -S "$src_dir/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null

# Libraries a program linking braid::braid_comm alone must not pull in, as basename patterns of link-line tokens,
# ldd's names and symbols.
forbidden_lib='^(-l|lib)(z3|glpk|Clp|CoinUtils|lemon|emon|boost)'
forbidden_sym='(^| )(Z3_|glp_|Clp_)|Clp[A-Z][A-Za-z]*::|CoinUtils|lemon::|boost::'

# What of the forbidden libraries `target` links: its link line in build.ninja, ldd, nm. One line per finding.
forbidden_in() {
  local target=$1 line tok
  line=$(awk -v t="$target" '$1 == "build" && $2 == t":" {found = 1; next} found && /^build / {exit}
    found && /LINK_LIBRARIES|LINK_PATH/ {print}' "$tmp/consumer/build.ninja")
  if [ -z "$line" ]; then
    echo "no link line for $target in build.ninja"
    return
  fi
  for tok in $line; do
    basename -- "$tok" | grep -Eq "$forbidden_lib" && echo "link line: $tok"
  done
  ldd "$tmp/consumer/$target" | awk '{print $1}' | while read -r lib; do
    basename -- "$lib" | grep -Eq "$forbidden_lib" && echo "ldd: $lib"
  done
  nm -C "$tmp/consumer/$target" | grep -E "$forbidden_sym" | head -3 | sed 's/^/nm: /'
  true
}

found=$(forbidden_in consumer)
if [ -n "$found" ]; then
  echo "FAIL: consumer links braid::braid_comm only, yet it links a solver / LP / graph library:" >&2
  echo "$found" >&2
  exit 1
fi
# The check can fail: braid_pareto brings the synthesizer, hence Z3, into consumer_pareto.
# (Captured first: with pipefail, grep -q closing the pipe early would fail forbidden_in with SIGPIPE.)
found_pareto=$(forbidden_in consumer_pareto)
if ! grep -qi 'z3' <<<"$found_pareto"; then
  echo "FAIL: the link check finds no Z3 in consumer_pareto (braid::braid_pareto)" >&2
  exit 1
fi

# Position-independent code: the shared object linked (above) and no archive has an absolute 32-bit relocation.
test -f "$tmp/consumer/libconsumer_plugin.so"
archives=$(find "$prefix" -name 'libbraid_*.a' | sort)
if [ -z "$archives" ]; then
  echo "FAIL: no libbraid_*.a installed under $prefix" >&2
  exit 1
fi
if [ "$(uname -m)" = x86_64 ]; then
  for a in $archives; do
    # Absolute 32-bit relocations outside debug sections (DWARF offsets use R_X86_64_32 in PIC code too).
    bad=$(readelf -rW "$a" | awk '/^Relocation section/ {debug = ($3 ~ /debug/)}
      !debug && ($3 == "R_X86_64_32" || $3 == "R_X86_64_32S") {n++} END {print n + 0}')
    if [ "$bad" != 0 ]; then
      echo "FAIL: $(basename "$a") holds $bad non-PIC relocations (R_X86_64_32/32S outside debug sections)" >&2
      exit 1
    fi
  done
fi

# Runs: the C API; an algorithm written offline by the installed CLI; the Pareto set at init.
mkdir "$tmp/algos"
"$prefix/bin/braid" algo ring --coll allreduce -n 2 -o "$tmp/algos/ring2.xml" >/dev/null
"$tmp/consumer/consumer" "$tmp/algos"
"$tmp/consumer/consumer_pareto" | tail -1
# The installed CLI finds the installed topologies by itself (not the source tree's copy).
json=$(env -u BRAID_TOPOLOGY_DIR "$prefix/bin/braid" topo show dgx1-v100 --json)
echo "$json" | grep -q '"gpus": *8'
echo "$json" | grep -q "\"source\": *\"$prefix/share/braid/topologies/dgx1-v100.yaml\""
# The NCCL plugins: installed in the lib dir, exporting NCCL's plugin symbols and nothing else, no solver needed.
libdir=$(find "$prefix" -name 'libnccl-net-braid.so' -printf '%h\n' | head -1)
if [ -z "$libdir" ] || [ ! -f "$libdir/libnccl-tuner-braid.so" ]; then
  echo "FAIL: libnccl-net-braid.so / libnccl-tuner-braid.so are not installed under $prefix" >&2
  exit 1
fi
for lib in libnccl-net-braid.so libnccl-tuner-braid.so; do
  extra=$(nm -D --defined-only "$libdir/$lib" | awk '{print $NF}' | grep -Ev '^nccl(Net|Tuner)Plugin_v[0-9]+$' || true)
  if [ -n "$extra" ]; then
    echo "FAIL: $lib exports more than NCCL's plugin symbols:" >&2
    echo "$extra" | head -5 >&2
    exit 1
  fi
  if readelf -d "$libdir/$lib" | grep -Eq 'NEEDED.*lib(z3|glpk)'; then
    echo "FAIL: $lib needs a solver or LP library:" >&2
    readelf -d "$libdir/$lib" | grep NEEDED >&2
    exit 1
  fi
done
nm -D --defined-only "$libdir/libnccl-net-braid.so" | grep -q ' ncclNetPlugin_v11$'
nm -D --defined-only "$libdir/libnccl-net-braid.so" | grep -q ' ncclTunerPlugin_v5$'
nm -D --defined-only "$libdir/libnccl-tuner-braid.so" | grep -q ' ncclTunerPlugin_v5$'
# The NCCL-API shim, in builds with CUDA: installed beside them, exporting NCCL's entry points only, needing neither
# libnccl (found at run time) nor a solver.
if [ -f "$build_dir/lib/libbraid_nccl.so" ]; then
  shim="$libdir/libbraid_nccl.so"
  if [ ! -f "$shim" ]; then
    echo "FAIL: libbraid_nccl.so is built but not installed in $libdir" >&2
    exit 1
  fi
  extra=$(nm -D --defined-only "$shim" | awk '{print $NF}' | grep -Ev '^nccl[A-Z][A-Za-z]*$' || true)
  if [ -n "$extra" ]; then
    echo "FAIL: libbraid_nccl.so exports more than NCCL entry points:" >&2
    echo "$extra" | head -5 >&2
    exit 1
  fi
  nm -D --defined-only "$shim" | grep -q ' ncclAllReduce$'
  if readelf -d "$shim" | grep -Eq 'NEEDED.*lib(nccl|z3|glpk)'; then
    echo "FAIL: libbraid_nccl.so needs libnccl, a solver or an LP library:" >&2
    readelf -d "$shim" | grep NEEDED >&2
    exit 1
  fi
fi
# The shim's companion (every build): in the same lib dir, where the installed shim looks for it; one versioned
# function exported.
pareto="$libdir/libbraid_nccl_pareto.so"
if [ ! -f "$pareto" ]; then
  echo "FAIL: libbraid_nccl_pareto.so is not installed in $libdir" >&2
  exit 1
fi
exported=$(nm -D --defined-only "$pareto" | awk '{print $NF}' | LC_ALL=C sort | tr '\n' ' ')
if [ "$exported" != "BRAID_NCCL_PARETO_1 braidNcclParetoSet_v1@@BRAID_NCCL_PARETO_1 " ]; then
  echo "FAIL: libbraid_nccl_pareto.so exports more or less than braidNcclParetoSet_v1: $exported" >&2
  exit 1
fi
echo "install test passed"
