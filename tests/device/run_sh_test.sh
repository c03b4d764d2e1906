#!/usr/bin/env bash
# shellcheck disable=SC2015  # "cond && ok || fail": ok never fails
# perf/device/run.sh on this build: argument handling (exit 2 naming the argument), and --cpu-check with --no-build
# (the plugins' exports and their loading by NCCL's names, the drivers' argument handling and no-GPU exit): exit 0,
# every GPU part reported as skipped with the reason, results under $OUT. pack.sh: its arguments (exit 2, checked
# before anything is written), a non-empty --dest it did not write refused and left as it was, an earlier pack
# replaced, and the pack itself; --with-pareto (the shim's companion and libz3, compressed) on a stand-in build, and
# run.sh --lib-dir expanding the compressed library.
# usage: run_sh_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
script="$src/perf/device/run.sh"
EXPECT_TIMEOUT=100
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/lib.sh" run-sh-test

expect_rc 0 "--help" -- bash "$script" --help
grep -q "^usage: perf/device/run.sh" "$tmp/out" && ok || fail "--help prints no usage"
expect_rc 2 "unknown argument" -- bash "$script" --bogus
grep -q "unknown argument '--bogus'" "$tmp/err" && ok || fail "unknown argument message: $(cat "$tmp/err")"
grep -q "^usage:" "$tmp/err" && ok || fail "no usage after a bad argument"
expect_rc 2 "bad part" -- bash "$script" --parts a,x --out "$tmp/o"
grep -q "unknown part 'x'" "$tmp/err" && ok || fail "bad part message: $(cat "$tmp/err")"
expect_rc 2 "bad timeout" -- bash "$script" --timeout soon --out "$tmp/o"
grep -q "timeout must be a whole number" "$tmp/err" && ok || fail "bad timeout message: $(cat "$tmp/err")"
expect_rc 2 "missing value" -- bash "$script" --parts
grep -q "^run.sh: --parts needs a value$" "$tmp/err" && ok || fail "missing value message: $(cat "$tmp/err")"
# The next option is not taken as a value (no CMake tree in ./--no-build, no "unknown argument 'X'").
mkdir -p "$tmp/cwd"
# shellcheck disable=SC2016  # $0 and $@ are the inner shell's
expect_rc 2 "--build-dir --no-build" -- bash -c 'cd "$0" && exec bash "$@"' "$tmp/cwd" "$script" --build-dir --no-build \
  --timeout 10 --out "$tmp/o"
grep -q "^run.sh: --build-dir needs a value, got the option '--no-build'" "$tmp/err" && ok ||
  fail "--build-dir --no-build message: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp/cwd")" ] && ok || fail "--build-dir --no-build wrote into the working folder: $(ls -A "$tmp/cwd")"
expect_rc 2 "--parts --out X" -- bash "$script" --parts --out "$tmp/o"
grep -q "^run.sh: --parts needs a value, got the option '--out'" "$tmp/err" && ok ||
  fail "--parts --out message: $(cat "$tmp/err")"
expect_rc 2 "--no-build without a build" -- bash "$script" --no-build --build-dir "$tmp/none" --out "$tmp/o"
grep -q "build folder $tmp/none does not exist" "$tmp/err" && ok || fail "--no-build message: $(cat "$tmp/err")"

# --cpu-check on this build, results in $OUT.
expect_rc 0 "--cpu-check" -- env OUT="$tmp/results" bash "$script" --cpu-check --no-build --build-dir "$build" \
  --timeout 90
s="$tmp/results/summary.txt"
[ -s "$s" ] && [ -s "$tmp/results/run.log" ] && [ -s "$tmp/results/cpu.log" ] && ok ||
  fail "no summary.txt / run.log / cpu.log in \$OUT: $(ls "$tmp/results")"
for p in t a b c; do
  grep -q "^part $p: skipped: no GPU (.\+)$" "$s" && ok || fail "part $p not reported as skipped with a reason: $(cat "$s")"
done
grep -q "^plugin exports: ok" "$s" && ok || fail "plugin exports: $(cat "$s")"
grep -q "^plugins load by NCCL's names .*: ok$" "$s" && ok || fail "plugin loading: $(cat "$s")"
grep -q "^braid_nccl_ranks -n 1: exit 2" "$s" && ok || fail "driver argument check: $(cat "$s")"
grep -q "^braid_cuda_benchmark --ranks 1: exit 2" "$s" && ok || fail "benchmark argument check: $(cat "$s")"
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
  grep -q '^braid_nccl_ranks without a GPU: exit 3, "braid_nccl_ranks: no usable GPU: cudaGetDeviceCount: ' "$s" &&
    ok || fail "no-GPU exit: $(cat "$s")"
fi
if [ ! -e "$build/lib/libbraid_nccl.so" ]; then
  grep -q "^part c: shim not built" "$s" && ok || fail "missing shim not reported: $(cat "$s")"
fi
grep -q "FAIL" "$s" && fail "a FAIL line in --cpu-check: $(grep FAIL "$s")" || ok

# --parts narrows the checks: part b alone needs no benchmark binary.
expect_rc 0 "--parts b" -- bash "$script" --cpu-check --no-build --build-dir "$build" --parts b --out "$tmp/b"
grep -q "^part b: skipped: no GPU" "$tmp/b/summary.txt" && ok || fail "--parts b: $(cat "$tmp/b/summary.txt")"
grep -q "^part a:" "$tmp/b/summary.txt" && fail "--parts b ran part a" || ok

# A build folder without the plugins: the check fails, naming what is missing.
mkdir -p "$tmp/empty"
expect_rc 1 "empty build" -- bash "$script" --cpu-check --no-build --build-dir "$tmp/empty" --parts b --out "$tmp/e"
grep -q "^plugins: FAIL (not built: .*libnccl-net-braid.so" "$tmp/e/summary.txt" && ok ||
  fail "empty build: $(cat "$tmp/e/summary.txt")"

# pack.sh's arguments: checked before anything is written; a folder it did not write is never emptied.
pack="$src/perf/device/pack.sh"
mkdir -p "$tmp/precious"
echo "not pack.sh's" >"$tmp/precious/file"
expect_rc 2 "pack.sh --max-mib abc" -- bash "$pack" --build-dir "$build" --dest "$tmp/pm" --max-mib abc
grep -q "^pack.sh: --max-mib must be a whole number of MiB >= 1, got 'abc'$" "$tmp/err" && ok ||
  fail "pack.sh --max-mib message: $(cat "$tmp/err")"
[ ! -e "$tmp/pm" ] && ok || fail "pack.sh --max-mib abc created its --dest"
expect_rc 2 "pack.sh --max-mib without a value" -- bash "$pack" --max-mib
expect_rc 2 "pack.sh --dest --max-mib" -- bash "$pack" --dest --max-mib 5
grep -q "^pack.sh: --dest needs a value, got the option '--max-mib'" "$tmp/err" && ok ||
  fail "pack.sh --dest --max-mib message: $(cat "$tmp/err")"
expect_rc 2 "pack.sh missing build folder" -- bash "$pack" --build-dir "$tmp/none" --dest "$tmp/precious"
grep -q "^pack.sh: --build-dir $tmp/none is not a folder$" "$tmp/err" && ok ||
  fail "pack.sh missing build message: $(cat "$tmp/err")"
[ "$(cat "$tmp/precious/file" 2>/dev/null)" = "not pack.sh's" ] && ok ||
  fail "pack.sh with a missing build folder touched --dest: $(ls -A "$tmp/precious")"

# pack.sh: the programs, the plugins and their non-system libraries in one folder (not the C/C++ runtime, CUDA's
# or NCCL's), under the size limit; run.sh --cpu-check runs from it with --lib-dir.
if [ -e "$build/bin/cuda_tests" ] && [ -e "$build/bin/transport_tests" ] && [ -e "$build/bin/braid_cuda_benchmark" ]; then
  expect_rc 0 "pack.sh" -- bash "$src/perf/device/pack.sh" --build-dir "$build" --dest "$tmp/pack"
  for f in bin/braid_nccl_ranks bin/braid_cuda_benchmark bin/cuda_tests bin/transport_tests \
    lib/libnccl-net-braid.so lib/libnccl-tuner-braid.so deps/libyaml-cpp.so.0.7 deps/libfmt.so.9; do
    [ -e "$tmp/pack/$f" ] && ok || fail "pack.sh left out $f"
  done
  find "$tmp/pack/deps" -name 'libc.so*' -o -name 'libstdc++*' -o -name 'libcudart*' -o -name 'libnccl.so*' |
    grep -q . && fail "pack.sh carried a system, CUDA or NCCL library: $(ls "$tmp/pack/deps")" || ok
  expect_rc 2 "pack.sh into a foreign folder" -- bash "$pack" --build-dir "$build" --dest "$tmp/precious"
  grep -q "^pack.sh: --dest $tmp/precious is a non-empty folder that pack.sh did not write" "$tmp/err" && ok ||
    fail "pack.sh foreign --dest message: $(cat "$tmp/err")"
  [ "$(ls -A "$tmp/precious")" = "file" ] && [ "$(cat "$tmp/precious/file")" = "not pack.sh's" ] && ok ||
    fail "pack.sh changed a foreign --dest: $(ls -A "$tmp/precious")"
  # An earlier pack (its marker) is replaced: a stale program goes, a file beside bin/lib/deps stays.
  [ -e "$tmp/pack/.braid-device-pack" ] && ok || fail "pack.sh wrote no .braid-device-pack"
  touch "$tmp/pack/bin/stale" "$tmp/pack/notes"
  expect_rc 0 "pack.sh over an earlier pack" -- bash "$pack" --build-dir "$build" --dest "$tmp/pack"
  [ ! -e "$tmp/pack/bin/stale" ] && [ -e "$tmp/pack/notes" ] && [ -e "$tmp/pack/bin/braid_nccl_ranks" ] && ok ||
    fail "pack.sh over an earlier pack: $(ls -A "$tmp/pack" "$tmp/pack/bin")"
  expect_rc 1 "pack.sh over --max-mib" -- bash "$src/perf/device/pack.sh" --build-dir "$build" --dest "$tmp/pack2" \
    --max-mib 1
  grep -q "over --max-mib 1" "$tmp/err" && ok || fail "size limit message: $(cat "$tmp/err")"
  expect_rc 0 "--cpu-check on the pack" -- bash "$script" --cpu-check --no-build --build-dir "$tmp/pack" \
    --lib-dir "$tmp/pack/deps" --parts a,b --out "$tmp/p"
  grep -q "^plugin exports: ok" "$tmp/p/summary.txt" && ok || fail "pack: $(cat "$tmp/p/summary.txt")"
  # With the shim's Pareto companion (libz3 compressed) the pack still fits the default 60 MiB.
  if [ -e "$build/lib/libbraid_nccl_pareto.so" ] && [ -e "$build/lib/libbraid_nccl.so" ]; then
    expect_rc 0 "pack.sh --with-pareto" -- bash "$pack" --build-dir "$build" --dest "$tmp/pack" --with-pareto
    [ -e "$tmp/pack/lib/libbraid_nccl_pareto.so" ] && [ -e "$tmp/pack/deps/libz3.so.4.gz" ] && ok ||
      fail "pack.sh --with-pareto: $(ls "$tmp/pack/lib" "$tmp/pack/deps")"
  fi
fi

# pack.sh --with-pareto on a stand-in build (the four programs copies of `true`, the shim a copy of the net plugin)
# around the real companion: it travels beside the shim, its libraries in deps, libz3 (22 MiB, over the 8 MiB line)
# gzip-compressed; without the flag neither travels. run.sh --lib-dir expands the .gz beside itself, and the packed
# companion then loads with libz3 from the pack.
companion="$build/lib/libbraid_nccl_pareto.so"
if [ -e "$companion" ] && [ -e "$build/lib/libnccl-net-braid.so" ] && [ -e "$build/lib/libnccl-tuner-braid.so" ]; then
  fake="$tmp/standin"
  mkdir -p "$fake/bin" "$fake/lib"
  for b in braid_nccl_ranks braid_cuda_benchmark cuda_tests transport_tests; do cp "$(type -P true)" "$fake/bin/$b"; done
  cp "$build/lib/libnccl-net-braid.so" "$build/lib/libnccl-tuner-braid.so" "$fake/lib/"
  expect_rc 1 "--with-pareto without the shim" -- bash "$pack" --build-dir "$fake" --dest "$tmp/pp" --with-pareto
  grep -q "^pack.sh: $fake/lib/libbraid_nccl.so is not built$" "$tmp/err" && ok ||
    fail "--with-pareto without the shim: $(cat "$tmp/err")"
  cp "$build/lib/libnccl-net-braid.so" "$fake/lib/libbraid_nccl.so"
  expect_rc 1 "--with-pareto without the companion" -- bash "$pack" --build-dir "$fake" --dest "$tmp/pp" --with-pareto
  grep -q "^pack.sh: $fake/lib/libbraid_nccl_pareto.so is not built$" "$tmp/err" && ok ||
    fail "--with-pareto without the companion: $(cat "$tmp/err")"
  [ ! -e "$tmp/pp" ] && ok || fail "a refused --with-pareto wrote its --dest"
  cp "$companion" "$fake/lib/"
  expect_rc 0 "stand-in pack without --with-pareto" -- bash "$pack" --build-dir "$fake" --dest "$tmp/pp"
  [ ! -e "$tmp/pp/lib/libbraid_nccl_pareto.so" ] && [ -z "$(find "$tmp/pp/deps" -name 'libz3*')" ] && ok ||
    fail "the companion travelled without --with-pareto: $(ls "$tmp/pp/lib" "$tmp/pp/deps")"
  expect_rc 0 "stand-in pack --with-pareto" -- bash "$pack" --build-dir "$fake" --dest "$tmp/pp" --with-pareto
  [ -e "$tmp/pp/lib/libbraid_nccl_pareto.so" ] && [ -e "$tmp/pp/lib/libbraid_nccl.so" ] && ok ||
    fail "--with-pareto: companion or shim missing: $(ls "$tmp/pp/lib")"
  # The companion's own libraries (Z3, GLPK for the LP bounds, yaml-cpp, fmt, pugixml); libz3 only as .gz.
  for f in libz3.so.4.gz libglpk.so.40 libyaml-cpp.so.0.7 libfmt.so.9 libpugixml.so.1; do
    [ -e "$tmp/pp/deps/$f" ] && ok || fail "--with-pareto left out deps/$f: $(ls "$tmp/pp/deps")"
  done
  [ ! -e "$tmp/pp/deps/libz3.so.4" ] && ok || fail "libz3 travelled uncompressed"
  [ "$(du -sm "$tmp/pp" | cut -f1)" -le 60 ] && ok || fail "stand-in pack over 60 MiB: $(du -sm "$tmp/pp")"
  grep -q "^pack.sh: $tmp/pp holds 4 programs, 4 libraries" "$tmp/out" && ok || fail "pack.sh summary: $(cat "$tmp/out")"
  # run.sh expands it (its other checks fail on the stand-ins: only the expansion and the loader are looked at here).
  bash "$script" --cpu-check --no-build --build-dir "$tmp/pp" --lib-dir "$tmp/pp/deps" --parts b --out "$tmp/ppo" \
    >/dev/null 2>&1
  gzip -dc "$tmp/pp/deps/libz3.so.4.gz" | cmp -s - "$tmp/pp/deps/libz3.so.4" && ok ||
    fail "run.sh did not expand deps/libz3.so.4.gz: $(ls "$tmp/pp/deps")"
  grep -q "^expanded $tmp/pp/deps/libz3.so.4.gz$" "$tmp/ppo/run.log" && ok || fail "run.sh logged no expansion"
  grep -q "libbraid_nccl_pareto.so: FAIL" "$tmp/ppo/summary.txt" && fail "companion unresolved: $(cat "$tmp/ppo/summary.txt")" || ok
  LD_LIBRARY_PATH="$tmp/pp/deps" ldd "$tmp/pp/lib/libbraid_nccl_pareto.so" >"$tmp/ldd.txt" 2>&1
  grep -q "libz3\.so\.4 => $tmp/pp/deps/libz3\.so\.4 " "$tmp/ldd.txt" && ok ||
    fail "the packed companion does not take libz3 from the pack: $(grep -i z3 "$tmp/ldd.txt"; ls -l "$tmp/pp/deps")"
  LD_LIBRARY_PATH="$tmp/pp/deps" python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' \
    "$tmp/pp/lib/libbraid_nccl_pareto.so" && ok || fail "the packed companion does not load with its stripped deps"
  # A second run finds libz3.so.4 up to date and leaves it.
  bash "$script" --cpu-check --no-build --build-dir "$tmp/pp" --lib-dir "$tmp/pp/deps" --parts b --out "$tmp/ppo2" \
    >/dev/null 2>&1
  grep -q "^expanded" "$tmp/ppo2/run.log" && fail "run.sh expanded an up-to-date library again" || ok
fi

finish
