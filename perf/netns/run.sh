#!/usr/bin/env bash
# perf/netns/run.sh — the all-to-all on emulated hosts (docs/congestion.md, "Measured on emulated hosts").
#
# Builds a small cluster out of network namespaces on this machine: H hosts (namespaces <prefix>-h0 ...), each with
# one interface eth0 (10.231.0.<k+1>/24), joined by veth pairs to a Linux bridge that lives in a namespace of its
# own (<prefix>-sw). Every bridge port towards a host is that host's downlink: an HTB class at --rate with a short
# pfifo (--queue packets) under it — a shallow-buffered switch port, where an all-to-all's incast (every sender
# into one receiver) overflows. Segmentation offloads are turned off on every veth so the pfifo counts MTU-sized
# packets. Nothing is configured outside these namespaces: no address, route or interface of the namespace the
# script runs in is touched, and every address used lives only inside them.
#
# Then, for every round and every policy (the order alternates between rounds), it starts one rank per host —
# `netns_alltoall` (this folder), or any --program that prints the same SAMPLE/CHECK lines — over the TCP
# transport, runs the all-to-all at every size with every byte checked, and prints p50/p99 completion time and
# throughput per policy side by side, with the change of adaptive against fixed. Namespaces and processes are
# removed on every exit (trap).
#
# Exit status: 0 when every run completed with every byte right; 1 otherwise; 2 on bad flags; 77 (ctest's skip)
# when the emulation cannot be built here (not root, no `ip`/`tc`/`unshare`/`python3`, no namespace, bridge, veth
# or htb support), with a line saying why.
#
# usage: perf/netns/run.sh [--smoke] [--hosts 4] [--rate 100mbit] [--queue 32] [--delay 0]
#                          [--sizes 1M,4M,16M] [--iters 20] [--warmup 2] [--rounds 2]
#                          [--policy 'LABEL:VAR=V ...']... [--env VAR=V]...
#                          [--driver PATH] [--program 'COMMAND'] [--keep-logs DIR] [--timeout 900]
#   --policy  a policy to compare, named LABEL, with its environment (default: 'fixed:BRAID_CC_POLICY=fixed' and
#             'adaptive:BRAID_CC_POLICY=adaptive', for the TCP transport's driver and the net plugin's alike);
#             repeat for more (e.g. 'credits2:BRAID_CC_CREDITS=2', 'chunk128K:NETNS_CHUNK=128K' for the plugin's).
#             NETNS_DRIVER=PATH among the variables runs that driver for this policy (e.g. netns_plugin_alltoall).
#   --env     environment of every rank of every policy (repeatable).
#   --program a second program run instead of the driver in every namespace, with the same environment
#             (BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT=10.231.0.1:port, BRAID_SOCKET_IFNAME=eth0, the policy's
#             variables) plus NETNS_LABEL, NETNS_SIZES, NETNS_ITERS, NETNS_WARMUP, NETNS_HOSTS (the hosts'
#             addresses, comma-separated); rank 0 must print `SAMPLE <label> <size> <iter> <us>` per timed
#             iteration and `CHECK <label> <size> <wrong bytes>` per size (as netns_alltoall does).
#   --delay   one-way delay added on every host's uplink (netem, e.g. 50us): a longer base RTT.
#   --timeout seconds one policy's run (every size, one round) may take before its ranks are killed (default 900);
#             also the ranks' BRAID_TIMEOUT (a rank that finished an all-to-all waits that long at the next barrier
#             for the slowest; --env BRAID_TIMEOUT=... overrides it).
#   --smoke   CI mode: 4 hosts, sizes 256K,1M, 5 iterations, 1 warm-up, 1 round (well under a minute); flags given
#             beside it win, in any order.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
hosts=4
rate=100mbit
queue=32
delay=0
run_timeout=900
sizes=1M,4M,16M
iters=20
warmup=2
rounds=2
driver="$here/../../build/bin/netns_alltoall"
program=""
keep_logs=""
policies=()
extra_env=()
smoke=0
given=""

die() { echo "netns: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts | --rate | --queue | --delay | --sizes | --iters | --warmup | --rounds | --policy | --env | --driver | \
      --program | --keep-logs | --timeout)
      [[ $# -ge 2 && $2 != --* ]] || die "$1 needs a value (see --help)" ;;
  esac
  case "$1" in
    --smoke) smoke=1; shift ;;
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --queue) queue=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --timeout) run_timeout=$2; shift 2 ;;
    --sizes) sizes=$2; given+=" sizes"; shift 2 ;;
    --iters) iters=$2; given+=" iters"; shift 2 ;;
    --warmup) warmup=$2; given+=" warmup"; shift 2 ;;
    --rounds) rounds=$2; given+=" rounds"; shift 2 ;;
    --policy) policies+=("$2"); shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --driver) driver=$2; shift 2 ;;
    --program) program=$2; shift 2 ;;
    --keep-logs) keep_logs=$2; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) die "unknown flag $1 (see --help)" ;;
  esac
done
# --smoke sets what the command line did not, in any order.
if [[ $smoke -eq 1 ]]; then
  [[ $given == *" sizes"* ]] || sizes=256K,1M
  [[ $given == *" iters"* ]] || iters=5
  [[ $given == *" warmup"* ]] || warmup=1
  [[ $given == *" rounds"* ]] || rounds=1
fi
[[ $hosts =~ ^[0-9]+$ && $hosts -ge 2 && $hosts -le 200 ]] || die "--hosts $hosts: a number in 2..200"
[[ $queue =~ ^[0-9]+$ && $queue -ge 1 ]] || die "--queue $queue: packets, at least 1"
[[ ${rate,,} =~ ^[0-9]+(\.[0-9]+)?[kmg]?(bit|bps)$ ]] || die "--rate $rate: tc's rate syntax (100mbit, 1gbit, 12.5mbps)"
[[ $iters =~ ^[0-9]+$ && $iters -ge 1 ]] || die "--iters $iters: at least 1"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || die "--rounds $rounds: at least 1"
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup $warmup: a number, 0 or more"
[[ $run_timeout =~ ^[0-9]+$ && $run_timeout -ge 1 ]] || die "--timeout $run_timeout: seconds, at least 1"
[[ $sizes =~ ^[1-9][0-9]*[KMG]?(,[1-9][0-9]*[KMG]?)*$ ]] || die "--sizes $sizes: bytes per peer, comma-separated (256K,1M,4M)"
if [[ ${#policies[@]} -eq 0 ]]; then
  policies=("fixed:BRAID_CC_POLICY=fixed" "adaptive:BRAID_CC_POLICY=adaptive")
fi
if [[ -z $program && ! -x $driver ]]; then
  die "no driver at $driver (build the netns_alltoall target, or pass --driver / --program)"
fi

skip() { echo "netns: skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "creating network namespaces needs root (uid $(id -u))"
for tool in ip tc unshare python3; do
  command -v "$tool" > /dev/null || skip "no '$tool' on this machine"
done

prefix="bnx$$"
sw="$prefix-sw"
pids=()
workdir=$(mktemp -d)
cleanup() {
  local ns pid
  for pid in "${pids[@]}"; do kill -9 "$pid" 2> /dev/null; done
  # Whatever still runs inside this script's namespaces was started by it (a rank's children included).
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^$prefix-"); do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
  done
  wait 2> /dev/null
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^$prefix-"); do ip netns del "$ns" 2> /dev/null; done
  if [[ -n $keep_logs ]]; then mkdir -p "$keep_logs" && cp -r "$workdir"/. "$keep_logs"/; fi
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$sw" 2> /dev/null || skip "ip netns add failed (no permission for network namespaces here)"
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge || skip "cannot create a bridge here (no bridge support in this kernel)"
ip -n "$sw" link set br0 up

# Turns segmentation offloads off (ethtool when present, else the device's GSO limit): one packet per MTU.
no_offload() {
  local ns=$1 dev=$2
  if command -v ethtool > /dev/null; then
    ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off > /dev/null 2>&1 && return 0
  fi
  ip -n "$ns" link set dev "$dev" gso_max_size 1500 gso_max_segs 1 2> /dev/null || true
}

addresses=()
for ((k = 0; k < hosts; k++)); do
  h="$prefix-h$k"
  addr="10.231.0.$((k + 1))"
  addresses+=("$addr")
  ip netns add "$h" || skip "cannot create namespace $h"
  ip -n "$h" link set lo up
  ip link add eth0 netns "$h" type veth peer name "p$k" netns "$sw" || skip "cannot create veth pairs here"
  ip -n "$h" addr add "$addr/24" dev eth0
  ip -n "$h" link set eth0 up
  ip -n "$sw" link set "p$k" master br0
  ip -n "$sw" link set "p$k" up
  no_offload "$h" eth0
  no_offload "$sw" "p$k"
  # The host's downlink: rate-limited, a short pfifo (the shallow buffer of a switch port).
  tc -n "$sw" qdisc add dev "p$k" root handle 1: htb default 1 &&
    tc -n "$sw" class add dev "p$k" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" quantum 1514 &&
    tc -n "$sw" qdisc add dev "p$k" parent 1:1 handle 10: pfifo limit "$queue" ||
    skip "tc htb with a pfifo failed on p$k (rate $rate, queue $queue): no sch_htb or pfifo in this kernel"
  if [[ $delay != 0 ]]; then
    tc -n "$h" qdisc add dev eth0 root netem delay "$delay" limit 100000 ||
      { echo "netns: netem delay '$delay' failed" >&2; exit 1; }
  fi
done
host_list=$(IFS=,; echo "${addresses[*]}")
# Wait for the links (and the bridge's ports) to forward: rank 0 reachable from the last host.
for _ in $(seq 1 50); do
  ip netns exec "$prefix-h$((hosts - 1))" ping -c 1 -W 1 "${addresses[0]}" > /dev/null 2>&1 && break
  sleep 0.1
done

echo "# netns all-to-all: $hosts hosts, downlinks $rate with a pfifo of $queue packets, uplink delay $delay, system TCP congestion control $(cat /proc/sys/net/ipv4/tcp_congestion_control 2> /dev/null) (BRAID_TCP_CONGESTION overrides it per socket)"
echo "# sizes $sizes per peer, $iters timed + $warmup warm-up iterations per size, $rounds round(s) per policy"
echo "# program: ${program:-$driver}"
[[ ${#extra_env[@]} -gt 0 ]] && echo "# env for every rank: ${extra_env[*]}"

# Packets sent and dropped by the downlinks' pfifos so far (summed over the hosts): "<sent> <dropped>".
downlink_counters() {
  local k sent=0 dropped=0 line
  for ((k = 0; k < hosts; k++)); do
    line=$(tc -s -n "$sw" qdisc show dev "p$k" | awk '/^qdisc pfifo 10:/{getline; print $4, $7}' | tr -d ',')
    sent=$((sent + ${line%% *}))
    dropped=$((dropped + ${line##* }))
  done
  echo "$sent $dropped"
}

# TCP retransmission timeouts and retransmitted segments of every host's stack so far (summed): "<rtos> <retrans>"
# (TcpExt TCPTimeouts, Tcp RetransSegs of each namespace's /proc/net).
tcp_counters() {
  local k rtos=0 retrans=0 line
  for ((k = 0; k < hosts; k++)); do
    line=$(ip netns exec "$prefix-h$k" awk '
      /^TcpExt:/ { if (!e) { for (i = 1; i <= NF; i++) en[i] = $i; e = 1 } else { for (i = 1; i <= NF; i++) if (en[i] == "TCPTimeouts") to = $i } }
      /^Tcp:/ { if (!t) { for (i = 1; i <= NF; i++) tn[i] = $i; t = 1 } else { for (i = 1; i <= NF; i++) if (tn[i] == "RetransSegs") rs = $i } }
      END { print to + 0, rs + 0 }' /proc/net/netstat /proc/net/snmp)
    rtos=$((rtos + ${line%% *}))
    retrans=$((retrans + ${line##* }))
  done
  echo "$rtos $retrans"
}

# This machine's CPU time so far, in clock ticks: "<busy> <system> <total>" (/proc/stat; system includes interrupt
# and softirq time, where the emulated network's packets are processed).
cpu_counters() {
  awk '/^cpu / { total = 0; for (i = 2; i <= NF; i++) total += $i; print total - $5 - $6, $4 + $7 + $8, total }' /proc/stat
}

status=0
launch=0
# One run of every rank with the policy `$1`; rank 0's output is appended to $workdir/samples.
run_policy() {
  local spec=$1 label=${1%%:*} vars=""
  [[ $spec == *:* ]] && vars=${spec#*:}
  launch=$((launch + 1))
  local port=$((21000 + launch))
  pids=()
  local before tcp_before
  before=$(downlink_counters)
  tcp_before=$(tcp_counters)
  local cpu_before
  cpu_before=$(cpu_counters)
  for ((k = 0; k < hosts; k++)); do
    # The call check off: each timed all-to-all is the exchange alone, without the check's extra message round.
    local env_list=(BRAID_RANK=$k BRAID_WORLD_SIZE=$hosts BRAID_ROOT=${addresses[0]}:$port
      BRAID_SOCKET_IFNAME=eth0 BRAID_TRANSPORT=tcp BRAID_CALL_CHECK=off BRAID_ALLTOALL=flat BRAID_TIMEOUT=$run_timeout
      NETNS_LABEL=$label NETNS_SIZES=$sizes NETNS_ITERS=$iters NETNS_WARMUP=$warmup NETNS_HOSTS=$host_list)
    # shellcheck disable=SC2206
    env_list+=(${extra_env[@]+"${extra_env[@]}"} $vars)
    local command
    # A policy may name its own driver (NETNS_DRIVER=PATH): the TCP transport's and the net plugin's side by side.
    local policy_driver=$driver var
    for var in $vars; do [[ $var == NETNS_DRIVER=* ]] && policy_driver=${var#NETNS_DRIVER=}; done
    if [[ -n $program ]]; then
      command=$program
    else
      command="$(printf '%q' "$policy_driver") --sizes $sizes --iters $iters --warmup $warmup --label $(printf '%q' "$label")"
    fi
    local out=/dev/null
    [[ $k -eq 0 ]] && out="$workdir/run$launch.out"
    # A UTS namespace of its own per rank: every emulated host has its own host name, as real hosts do.
    ip netns exec "$prefix-h$k" unshare --uts -- sh -c "hostname $prefix-h$k && exec env $(printf '%q ' "${env_list[@]}") timeout $run_timeout $command" \
      > "$out" 2> "$workdir/run$launch.rank$k.err" &
    pids+=($!)
  done
  local failed=0 rc
  for ((k = 0; k < hosts; k++)); do
    wait "${pids[$k]}"
    rc=$?
    if [[ $rc -ne 0 ]]; then failed=1; fi
    if [[ $rc -eq 124 ]]; then
      echo "timed out: still running after $run_timeout s (run.sh --timeout), killed" >> "$workdir/run$launch.rank$k.err"
    fi
  done
  pids=()
  cat "$workdir/run$launch.out" >> "$workdir/samples"
  local after
  after=$(downlink_counters)
  echo "DROPS $label $((${after%% *} - ${before%% *})) $((${after##* } - ${before##* }))" >> "$workdir/samples"
  local cpu_after
  cpu_after=$(cpu_counters)
  # shellcheck disable=SC2086
  echo "CPU $label $(python3 -c 'import sys; b = list(map(int, sys.argv[1:4])); a = list(map(int, sys.argv[4:7])); print(*[x - y for x, y in zip(a, b)])' $cpu_before $cpu_after)" >> "$workdir/samples"
  local tcp_after
  tcp_after=$(tcp_counters)
  echo "TCPSTAT $label $((${tcp_after%% *} - ${tcp_before%% *})) $((${tcp_after##* } - ${tcp_before##* }))" \
    >> "$workdir/samples"
  if [[ $failed -ne 0 ]]; then
    status=1
    echo "netns: policy $label (run $launch) failed; rank errors:" >&2
    for ((k = 0; k < hosts; k++)); do sed "s/^/  rank $k: /" "$workdir/run$launch.rank$k.err" | head -5 >&2; done
  fi
}

for ((round = 0; round < rounds; round++)); do
  if ((round % 2 == 0)); then
    for spec in "${policies[@]}"; do run_policy "$spec"; done
  else
    for ((i = ${#policies[@]} - 1; i >= 0; i--)); do run_policy "${policies[$i]}"; done
  fi
done

labels=()
for spec in "${policies[@]}"; do labels+=("${spec%%:*}"); done
python3 "$here/summarize.py" "$workdir/samples" "$hosts" "$rate" "${labels[@]}" || status=1
exit $status
