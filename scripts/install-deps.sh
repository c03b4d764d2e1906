#!/usr/bin/env bash
# Installs every Debian 12 package Braid's build, tests and benchmarks need. Idempotent: when all
# packages are already installed it changes nothing and does not touch the network.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-format
  libyaml-cpp-dev libpugixml-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libz3-dev libgtest-dev libgmock-dev libbenchmark-dev
  liblemon-dev libboost-graph-dev coinor-libclp-dev libglpk-dev
  libucx-dev ucx-utils libgloo-dev libopenmpi-dev openmpi-bin
  librsvg2-bin python3 chromium
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
