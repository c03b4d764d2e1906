#!/usr/bin/env bash
# perf/device/pack.sh: copies what perf/device/run.sh runs out of a CUDA build into one folder that can travel to a
# machine with a GPU but without Braid's build dependencies (no yaml-cpp, fmt, pugixml, GoogleTest, UCX there, and no
# package registry to install them): DEST/bin (braid_nccl_ranks, braid_cuda_benchmark, cuda_tests,
# transport_tests), DEST/lib (the NCCL plugins, and the shim libbraid_nccl.so when built), DEST/deps (every shared
# library those need except the C/C++ runtime, CUDA's and NCCL's, which the GPU machine has). Then, there:
#   perf/device/run.sh --no-build --build-dir DEST --lib-dir DEST/deps
# Fails (exit 1) naming a file that is missing or when the folder passes --max-mib (default 60).
# usage: perf/device/pack.sh [--build-dir DIR (build)] [--dest DIR (.device-build)] [--max-mib N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$ROOT/build"
dest="$ROOT/.device-build"
max_mib=60
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a value}; shift ;;
    --dest) dest=${2:?--dest needs a value}; shift ;;
    --max-mib) max_mib=${2:?--max-mib needs a value}; shift ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "pack.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
bins=(braid_nccl_ranks braid_cuda_benchmark cuda_tests transport_tests)
libs=(libnccl-net-braid.so libnccl-tuner-braid.so)
[ -e "$build/lib/libbraid_nccl.so" ] && libs+=(libbraid_nccl.so)
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/deps"
for b in "${bins[@]}"; do
  [ -e "$build/bin/$b" ] || { echo "pack.sh: $build/bin/$b is not built" >&2; exit 1; }
  cp "$build/bin/$b" "$dest/bin/"
  strip --strip-debug "$dest/bin/$b"
done
for l in "${libs[@]}"; do
  [ -e "$build/lib/$l" ] || { echo "pack.sh: $build/lib/$l is not built" >&2; exit 1; }
  cp "$build/lib/$l" "$dest/lib/"
  strip --strip-debug "$dest/lib/$l"
done
# The C/C++ runtime, CUDA and NCCL come from the GPU machine; everything else travels.
keep_out='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart\.|libnccl\.)'
for f in "$dest"/bin/* "$dest"/lib/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ "$name" =~ $keep_out ]]; then cp -L "$path" "$dest/deps/$name"; fi
done
size_mib=$(du -sm "$dest" | cut -f1)
count() { find "$1" -type f | wc -l; }
echo "pack.sh: $dest holds $(count "$dest/bin") programs, $(count "$dest/lib") plugin libraries and" \
  "$(count "$dest/deps") dependencies, ${size_mib} MiB:" "$(cd "$dest/deps" && echo *)"
if [ "$size_mib" -gt "$max_mib" ]; then
  echo "pack.sh: $dest is ${size_mib} MiB, over --max-mib $max_mib" >&2
  exit 1
fi
