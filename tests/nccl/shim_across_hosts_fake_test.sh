#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2154  # "cond && ok || fail": ok never fails; lib.sh sets tmp
# The NCCL-API shim's choice of what runs Braid (BRAID_NCCL_ACROSS_HOSTS, docs/nccl.md) on a machine without a GPU:
# braid_nccl_ranks (2 rank processes, every result checked) with libbraid_nccl.so preloaded in front of
# fake_cuda_nccl.so (CUDA and NCCL stand-ins, tests/device) and BRAID_ALGO_DIR's 2-rank algorithms, so that the shim
# sets Braid up on the communicator. The setup runs for real up to the GPU: the unique id, Braid's bootstrap (with
# BRAID_HOSTID per rank from --braid-hostid-prefix, the ranks are two hosts), the agreement on the choice and, for the
# hierarchical path, the proxies' TCP transport; the GPU executor then fails (no GPU), so the calls go to the stand-in
# NCCL, whose results must stay right. Checked, on both ranks, from the communicator lines and warnings:
#  - an invalid BRAID_NCCL_ACROSS_HOSTS is refused naming the variable and its value, and the calls go to NCCL;
#  - two hosts: host-driven by default, the hierarchical executor with proxies over tcp when asked;
#  - two hosts, hierarchical, BRAID_TRANSPORT=shm: refused naming BRAID_TRANSPORT; one host: the device-resident
#    executor whatever the setting (BRAID_TRANSPORT=shm is not refused there).
# usage: shim_across_hosts_fake_test.sh BRAID_NCCL_RANKS FAKE_CUDA_NCCL_SO LIBBRAID_NCCL_SO ALGO_DIR
set -uo pipefail
bin=$1
fake_so=$2
shim_so=$3
algos=$4
# shellcheck source=tests/nccl/require_built.sh
source "$(dirname "$0")/require_built.sh"
require_built braid_nccl_ranks "$bin" braid_fake_cuda_nccl "$fake_so" braid_nccl "$shim_so"
# shellcheck source=tests/device/lib.sh
source "$(dirname "$0")/../device/lib.sh" shim-across-hosts
mkdir -p "$tmp/x"
run=(env -u BRAID_NCCL_ACROSS_HOSTS -u BRAID_TRANSPORT -u BRAID_HOSTID LD_PRELOAD="$shim_so $fake_so"
  FAKE_NCCL_DIR="$tmp/x" BRAID_DEBUG=INFO BRAID_ALGO_DIR="$algos" BRAID_TIMEOUT=20)
ranks=(-n 2 -b 1K -e 1K -w 0 -i 1 -c all_reduce)
two_hosts=(--braid-hostid-prefix braid-fake-host-)

# comm_lines WHAT: both ranks' communicator lines say WHAT (a grep pattern after "device 0: ").
comm_lines() {
  local n
  n=$(grep -c "shim: communicator of ncclCommInitRank, rank [01] of 2 device 0: $1" "$tmp/err")
  [ "$n" = 2 ] && ok || fail "$2: $n of 2 communicator lines match '$1': $(grep 'communicator of' "$tmp/err")"
}
results() { grep -q "^# all results checked: 0 wrong$" "$tmp/out" && ok || fail "$1: results: $(tail -n 3 "$tmp/out")"; }

# --- An invalid value: refused on every rank, naming it; the calls go to NCCL.
expect_rc 0 "BRAID_NCCL_ACROSS_HOSTS=bogus" -- "${run[@]}" BRAID_NCCL_ACROSS_HOSTS=bogus "$bin" "${ranks[@]}" \
  "${two_hosts[@]}"
results bogus
[ "$(grep -c "WARN.*shim: ncclCommInitRank: Braid could not be set up on this communicator (rank [01] of 2): .*BRAID_NCCL_ACROSS_HOSTS=bogus: not host-driven or hierarchical; its calls go to NCCL" "$tmp/err")" = 2 ] &&
  ok || fail "bogus: warnings: $(grep WARN "$tmp/err")"
comm_lines "calls go to NCCL (Braid setup failed: BRAID_NCCL_ACROSS_HOSTS=bogus: not host-driven or hierarchical)" bogus
grep -q "ncclAllReduce count 256 float sum 2 ranks -> NCCL (Braid setup failed: BRAID_NCCL_ACROSS_HOSTS=bogus" \
  "$tmp/err" && ok || fail "bogus: the all-reduce's line: $(grep 'ncclAllReduce' "$tmp/err" | head -3)"

# --- Two hosts, the default: the host-driven CUDA transport (which fails without a GPU).
expect_rc 0 "two hosts, default" -- "${run[@]}" "$bin" "${ranks[@]}" "${two_hosts[@]}"
results default
comm_lines "calls go to NCCL (Braid setup failed: host-driven CUDA transport: " "two hosts, default"

# --- Two hosts, hierarchical: the proxies' TCP transport is made, then the executor fails (no GPU).
expect_rc 0 "two hosts, hierarchical" -- "${run[@]}" BRAID_NCCL_ACROSS_HOSTS=hierarchical "$bin" "${ranks[@]}" \
  "${two_hosts[@]}"
results hierarchical
comm_lines "calls go to NCCL (Braid setup failed: device-resident executor, hierarchical: 2 hosts, proxies over tcp: " \
  "two hosts, hierarchical"
# The executor took the proxies' endpoint (no "need DeviceExecutorOptions::proxy_transport", no "does not drive
# rank"): it failed later, at its first CUDA allocation.
grep -q "proxy transport\|proxy_transport\|does not drive rank" "$tmp/err" &&
  fail "hierarchical: the proxies' transport failed or did not reach the executor: $(grep 'communicator of' "$tmp/err")" || ok
[ "$(grep -c "hierarchical: 2 hosts, proxies over tcp: device-resident executor: cuda" "$tmp/err")" -ge 2 ] && ok ||
  fail "hierarchical: the executor did not reach CUDA: $(grep 'communicator of' "$tmp/err")"

# --- Two hosts, hierarchical, BRAID_TRANSPORT=shm: refused naming BRAID_TRANSPORT.
expect_rc 0 "two hosts, hierarchical, shm" -- "${run[@]}" BRAID_NCCL_ACROSS_HOSTS=HIERARCHICAL BRAID_TRANSPORT=shm \
  "$bin" "${ranks[@]}" "${two_hosts[@]}"
results shm
comm_lines "calls go to NCCL (Braid setup failed: BRAID_TRANSPORT=shm: does not cross hosts; the hierarchical path's proxies need tcp, ucx or auto)" \
  "hierarchical, shm"

# --- One host: the device-resident executor whatever the setting.
expect_rc 0 "one host, hierarchical" -- "${run[@]}" BRAID_NCCL_ACROSS_HOSTS=hierarchical BRAID_TRANSPORT=shm "$bin" \
  "${ranks[@]}"
results "one host"
comm_lines "calls go to NCCL (Braid setup failed: device-resident executor: " "one host"

finish
