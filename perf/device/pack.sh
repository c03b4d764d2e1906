#!/usr/bin/env bash
# perf/device/pack.sh: copies what perf/device/run.sh runs out of a CUDA build into one folder that can travel to a
# machine with a GPU but without Braid's build dependencies (no yaml-cpp, fmt, pugixml, GoogleTest, UCX there, and no
# package registry to install them): DEST/bin (braid_nccl_ranks, braid_cuda_benchmark, cuda_tests,
# transport_tests), DEST/lib (the NCCL plugins, and the shim libbraid_nccl.so when built), DEST/deps (every shared
# library those need except the C/C++ runtime, CUDA's and NCCL's, which the GPU machine has; stripped of symbols the
# loader does not need). Then, there:
#   perf/device/run.sh --no-build --build-dir DEST --lib-dir DEST/deps
# --with-pareto also carries the shim's companion libbraid_nccl_pareto.so (the Pareto set for BRAID_TOPOLOGY; it needs
# libz3) into DEST/lib beside the shim, where the shim finds it without BRAID_NCCL_PARETO_LIB, and its libraries into
# DEST/deps. A dependency over 8 MiB (libz3, 22 MiB) travels gzip-compressed as DEST/deps/NAME.gz, so that the folder
# stays under --max-mib; run.sh --lib-dir expands it beside itself before anything runs (by hand: gzip -dk deps/*.gz).
# DEST may be missing, empty, or an earlier pack (it holds .braid-device-pack): then its bin, lib and deps are
# replaced. Any other DEST is refused and left as it is. Every file is checked before DEST is touched.
# Exit: 0 packed; 1 a file is missing (named) or the folder passes --max-mib (default 60); 2 bad arguments.
# usage: perf/device/pack.sh [--build-dir DIR (build)] [--dest DIR (.device-build)] [--max-mib N] [--with-pareto]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$ROOT/build"
dest="$ROOT/.device-build"
max_mib=60
with_pareto=0
marker=.braid-device-pack
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir | --dest | --max-mib)
      if [ $# -lt 2 ] || [ -z "$2" ]; then echo "pack.sh: $1 needs a value" >&2; exit 2; fi
      if [[ "$2" == --* ]]; then
        echo "pack.sh: $1 needs a value, got the option '$2' (a value may not start with --)" >&2
        exit 2
      fi
      case "$1" in
        --build-dir) build=$2 ;;
        --dest) dest=$2 ;;
        --max-mib) max_mib=$2 ;;
      esac
      shift ;;
    --with-pareto) with_pareto=1 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "pack.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$max_mib" =~ ^[0-9]+$ ]] || [ "$((10#$max_mib))" -lt 1 ]; then
  echo "pack.sh: --max-mib must be a whole number of MiB >= 1, got '$max_mib'" >&2
  exit 2
fi
max_mib=$((10#$max_mib))
if [ ! -d "$build" ]; then
  echo "pack.sh: --build-dir $build is not a folder" >&2
  exit 2
fi
bins=(braid_nccl_ranks braid_cuda_benchmark cuda_tests transport_tests)
libs=(libnccl-net-braid.so libnccl-tuner-braid.so)
[ -e "$build/lib/libbraid_nccl.so" ] || [ "$with_pareto" = 1 ] && libs+=(libbraid_nccl.so)
# The companion serves the shim: with --with-pareto both must be built.
[ "$with_pareto" = 1 ] && libs+=(libbraid_nccl_pareto.so)
for f in "${bins[@]/#/bin/}" "${libs[@]/#/lib/}"; do
  [ -e "$build/$f" ] || { echo "pack.sh: $build/$f is not built" >&2; exit 1; }
done
# Only a folder this script wrote (the marker) or an empty one is written into; nothing else in it is deleted.
if [ -e "$dest" ] && [ ! -d "$dest" ]; then
  echo "pack.sh: --dest $dest exists and is not a folder; left as it is" >&2
  exit 2
fi
if [ -d "$dest" ] && [ ! -e "$dest/$marker" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "pack.sh: --dest $dest is a non-empty folder that pack.sh did not write (no $marker in it); left as it is:" \
    "name a new or empty folder" >&2
  exit 2
fi
mkdir -p "$dest"
rm -rf "${dest:?}/bin" "${dest:?}/lib" "${dest:?}/deps"
echo "written by perf/device/pack.sh from $build; the next pack.sh --dest here replaces bin, lib and deps" \
  >"$dest/$marker"
mkdir -p "$dest/bin" "$dest/lib" "$dest/deps"
for b in "${bins[@]}"; do
  cp "$build/bin/$b" "$dest/bin/"
  strip --strip-debug "$dest/bin/$b"
done
for l in "${libs[@]}"; do
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
# Copies only: symbols the dynamic loader does not need go; a dependency still over 8 MiB is gzip-compressed.
for d in "$dest"/deps/*; do
  [ -e "$d" ] || continue
  chmod u+w "$d"
  strip --strip-unneeded "$d" || echo "pack.sh: strip failed on $d; it travels unstripped" >&2
  if [ "$(stat -c %s "$d")" -gt $((8 * 1024 * 1024)) ]; then gzip -9 -n "$d"; fi
done
size_mib=$(du -sm "$dest" | cut -f1)
count() { find "$1" -type f | wc -l; }
echo "pack.sh: $dest holds $(count "$dest/bin") programs, $(count "$dest/lib") libraries (the plugins, the shim when built," \
  "its Pareto companion with --with-pareto) and $(count "$dest/deps") dependencies (.gz: expanded by run.sh --lib-dir)," \
  "${size_mib} MiB:" "$(cd "$dest/deps" && echo *)"
if [ "$size_mib" -gt "$max_mib" ]; then
  echo "pack.sh: $dest is ${size_mib} MiB, over --max-mib $max_mib" >&2
  exit 1
fi
