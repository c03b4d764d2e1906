#!/usr/bin/env bash
# shellcheck disable=SC2015  # "cond && ok || fail": ok never fails
# The shim's test scripts (shim_gpu_check.sh, shim_pareto_fake_test.sh, shim_across_hosts_fake_test.sh) run programs
# and libraries built by other CMake targets. When one is not built, each script fails at once naming the missing
# file and the target that builds it, rather than blaming the program or NCCL for its exit status 127. Runs in
# every build (no GPU, no CUDA: nothing is started). Usage: shim_scripts_missing_programs_test.sh SOURCE_DIR
set -uo pipefail
src=$1
here=$src/tests/nccl
EXPECT_TIMEOUT=30
# shellcheck source=../device/lib.sh
source "$src/tests/device/lib.sh" shim-scripts
has() { grep -qF -- "$2" "$tmp/out" && ok || fail "$1: no line '$2': $(head -n 5 "$tmp/out" "$tmp/err")"; }

build=$tmp/build
mkdir -p "$build/bin" "$build/lib"
for script in shim_pareto_fake_test.sh shim_across_hosts_fake_test.sh; do
  expect_rc 1 "$script, nothing built" -- bash "$here/$script" "$build/bin/braid_nccl_ranks" \
    "$build/lib/libbraid_fake_cuda_nccl.so" "$build/lib/libbraid_nccl.so" "$src/tests/data/shim"
  has "$script" "FAIL: $build/bin/braid_nccl_ranks does not exist: build the CMake target braid_nccl_ranks first (cmake --build $build --target braid_nccl_ranks)"
  has "$script" "FAIL: $build/lib/libbraid_fake_cuda_nccl.so does not exist: build the CMake target braid_fake_cuda_nccl first"
  has "$script" "FAIL: $build/lib/libbraid_nccl.so does not exist: build the CMake target braid_nccl first"
  [ "$(wc -l <"$tmp/out")" = 3 ] && ok || fail "$script: more than the 3 missing files reported: $(cat "$tmp/out")"
done
# Only the driver missing: that one is named, the others are not.
: >"$build/lib/libbraid_fake_cuda_nccl.so"
: >"$build/lib/libbraid_nccl.so"
expect_rc 1 "shim_pareto_fake_test.sh, driver missing" -- bash "$here/shim_pareto_fake_test.sh" "$build/bin/braid_nccl_ranks" \
  "$build/lib/libbraid_fake_cuda_nccl.so" "$build/lib/libbraid_nccl.so" "$src/tests/data/shim/nvlink-4g.yaml"
[ "$(cat "$tmp/out")" = "FAIL: $build/bin/braid_nccl_ranks does not exist: build the CMake target braid_nccl_ranks first (cmake --build $build --target braid_nccl_ranks)" ] &&
  ok || fail "driver missing: $(cat "$tmp/out")"

expect_rc 1 "shim_gpu_check.sh, check program missing" -- bash "$here/shim_gpu_check.sh" "$build/lib/libbraid_nccl.so" \
  "$build/bin/nccl_shim_gpu_check" "$src/tests/data/shim"
has "shim_gpu_check.sh" "FAIL: $build/bin/nccl_shim_gpu_check does not exist: build the CMake target nccl_shim_gpu_check first"
grep -q "not the shim's doing" "$tmp/out" && fail "shim_gpu_check.sh blames NCCL for a missing program" || ok
# A program that exists but cannot start (its loader fails: status 127) is named as such, not as NCCL failing.
printf '#!/bin/sh\necho "error while loading shared libraries: libnccl.so.2" >&2\nexit 127\n' >"$build/bin/nccl_shim_gpu_check"
chmod +x "$build/bin/nccl_shim_gpu_check"
expect_rc 1 "shim_gpu_check.sh, program cannot start" -- bash "$here/shim_gpu_check.sh" "$build/lib/libbraid_nccl.so" \
  "$build/bin/nccl_shim_gpu_check" "$src/tests/data/shim"
has "cannot start" "FAIL: $build/bin/nccl_shim_gpu_check could not be started (status 127: a shared library it needs is missing, see above)"
grep -q "not the shim's doing" "$tmp/out" && fail "shim_gpu_check.sh blames NCCL for a program that cannot start" || ok

finish
