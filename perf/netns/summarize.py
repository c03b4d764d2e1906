#!/usr/bin/env python3
"""perf/netns/summarize.py SAMPLES HOSTS RATE LABEL... — the table of perf/netns/run.sh.

Reads the lines the ranks' rank 0 printed (SAMPLE <label> <size> <iteration> <us>, CHECK <label> <size> <wrong
bytes>) and run.sh's DROPS <label> <packets sent> <dropped> lines; prints per size and policy the p50 / p99 (nearest
rank: with 20 samples per round the p99 is the largest but none) and the largest completion time, the throughput
(bytes every host sent to the others over the summed completion times), the ideal time (one downlink's bytes at
RATE) and the wrong bytes; then the downlinks' pfifo drops and the hosts' TCP timeouts and retransmissions (TCPSTAT
<label> <RTOs> <segments retransmitted>) and this machine's CPU use (CPU <label> <busy> <system> <total> clock
ticks) per policy, and every policy's change against the first.
Exit status 1 when a size has wrong bytes or no check line.
"""
import math, re, sys
path, hosts, rate, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
samples, wrong, packets, tcpstat, cpu = {}, {}, {}, {}, {}
for line in open(path):
    f = line.split()
    if len(f) == 5 and f[0] == "SAMPLE":
        samples.setdefault((f[1], int(f[2])), []).append(float(f[4]))
    elif len(f) == 4 and f[0] == "DROPS":
        packets[f[1]] = [a + int(b) for a, b in zip(packets.get(f[1], [0, 0]), f[2:])]
    elif len(f) == 5 and f[0] == "CPU":
        cpu[f[1]] = [a + int(b) for a, b in zip(cpu.get(f[1], [0, 0, 0]), f[2:])]
    elif len(f) == 4 and f[0] == "TCPSTAT":
        tcpstat[f[1]] = [a + int(b) for a, b in zip(tcpstat.get(f[1], [0, 0]), f[2:])]
    elif len(f) == 4 and f[0] == "CHECK":
        wrong[(f[1], int(f[2]))] = wrong.get((f[1], int(f[2])), 0) + int(f[3])
m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)(bit|bps)", rate.lower())
bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] * (8 if m.group(3) == "bps" else 1) if m else 0

def pct(values, p):  # nearest rank
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]

def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 and b % (1 << 20) == 0 else f"{b >> 10} KiB"

stats = {}
for (label, size), v in samples.items():
    moved = hosts * (hosts - 1) * size * 8 * len(v)  # bits over the network in all timed iterations
    stats[(label, size)] = dict(n=len(v), p50=pct(v, 50) / 1e3, p99=pct(v, 99) / 1e3, max=max(v) / 1e3,
                                gbps=moved / (sum(v) * 1e-6) / 1e9)
sizes = sorted({s for (_, s) in stats})
print("#")
print(f"# completion time of one all-to-all (slowest rank), ms; throughput = bytes all hosts sent to other hosts / "
      f"time, Gbit/s (downlinks: {hosts} x {rate})")
print(f"# {'size/peer':>10} {'policy':>12} {'iters':>5} {'p50':>9} {'p99':>9} {'max':>9} {'Gbit/s':>7} "
      f"{'ideal':>8} {'wrong':>6}")
for size in sizes:
    ideal = (hosts - 1) * size * 8 / bits * 1e3 if bits else float("nan")
    for label in labels:
        s = stats.get((label, size))
        if s is None:
            print(f"  {size_text(size):>10} {label:>12}   (no samples)")
            continue
        print(f"  {size_text(size):>10} {label:>12} {s['n']:>5} {s['p50']:>9.2f} {s['p99']:>9.2f} {s['max']:>9.2f} "
              f"{s['gbps']:>7.3f} {ideal:>8.2f} {wrong.get((label, size), 'n/a'):>6}")
print("#")
print("# packets through the downlinks' pfifos per policy (all sizes, warm-up included): sent, dropped")
for label in labels:
    sent, dropped = packets.get(label, [0, 0])
    print(f"  {label:>12}: {sent} sent, {dropped} dropped ({100 * dropped / max(1, sent + dropped):.2f}%)")
if tcpstat:
    print("#")
    print("# TCP on all hosts per policy (all sizes, warm-up included): retransmission timeouts (RTOs), segments "
          "retransmitted")
    for label in labels:
        rtos, retrans = tcpstat.get(label, [0, 0])
        print(f"  {label:>12}: {rtos} RTOs, {retrans} segments retransmitted")
if cpu:
    print("#")
    print("# this machine's CPUs during each policy's runs: busy and system (kernel, interrupts: the emulated network) "
          "share of all CPU time; near 100% busy, the CPUs, not the links, limit the run")
    for label in labels:
        busy, system, total = cpu.get(label, [0, 0, 0])
        print(f"  {label:>12}: busy {100 * busy / max(1, total):.0f}%, system {100 * system / max(1, total):.0f}%")
if len(labels) >= 2:
    base = labels[0]
    print("#")
    print(f"# change against {base} (negative p99 = lower tail; positive throughput = faster)")
    for label in labels[1:]:
        for size in sizes:
            a, b = stats.get((base, size)), stats.get((label, size))
            if a and b:
                print(f"  {size_text(size):>10} {label:>12}: p50 {100 * (b['p50'] / a['p50'] - 1):+6.1f}%  "
                      f"p99 {100 * (b['p99'] / a['p99'] - 1):+6.1f}%  throughput {100 * (b['gbps'] / a['gbps'] - 1):+6.1f}%")
bad = sum(1 for k, w in wrong.items() if w != 0)
missing = [k for k in stats if k not in wrong]
if bad or missing or not stats:
    print(f"netns: {bad} size(s) with wrong bytes, {len(missing)} without a check line", file=sys.stderr)
    sys.exit(1)
