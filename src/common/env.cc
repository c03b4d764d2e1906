#include "common/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace braid {

const std::vector<EnvParam>& envParams() {
  static const std::vector<EnvParam> params = {
      {"BRAID_TOPOLOGY_DIR", "",
       "Folder searched first for shipped topology names (`dgx1-v100`), before the installed "
       "`share/braid/topologies` and the source tree's `topologies/`."},
      {"BRAID_TIMEOUT", "300",
       "Seconds any blocking wait of the runtime (bootstrap rendezvous, a transport poll) may last before it "
       "returns a timeout error naming what it waited for. A dead peer is reported at once, not after it. `inf`, "
       "and any value above 1e8 (about 3 years), wait 1e8 s: in practice no timeout. A value that is not a positive "
       "number (0, negative, nan, text) is an error naming the variable, from the first call that reads it "
       "(bootstrap, communicator or transport creation)."},
      {"BRAID_SPIN_US", "50",
       "Microseconds a blocking poll of the shared-memory or threads transport keeps polling before it sleeps; "
       "none when the host's ranks outnumber the cores the process may run on, fewer after spins that found "
       "nothing; `0` sleeps at once; at most 1000. A value that is not a number >= 0 falls back to 50, one above "
       "1000 to 1000, with a warning on stderr."},
      {"BRAID_TRANSPORT", "auto",
       "Transport between ranks: `auto` (threads when every rank is in one process, else shared memory when "
       "all share a host, else TCP), `threads`, `shm`, `tcp`, `ucx`."},
      {"BRAID_ALGO_DIR", "",
       "Folder of MSCCL XML / Braid JSON algorithms; the communicator runs the one that matches the "
       "collective, rank count, size window and in-place-ness before anything else. The NCCL-API shim "
       "(libbraid_nccl.so) runs its matches instead of NCCL's (docs/nccl.md)."},
      {"BRAID_TOPO", "",
       "Topology (file or shipped name) whose synthesized Pareto set the communicator uses when "
       "BRAID_ALGO_DIR has no match and the rank count equals its GPU count."},
      {"BRAID_DEBUG", "WARN",
       "Log level of stderr messages (read once): `NONE` (or `OFF`) silences them, `WARN` prints warnings, "
       "`INFO` adds each algorithm choice (collective, size, algorithm, source) and transport setup, `TRACE` "
       "adds per-call detail."},
      {"BRAID_RANK", "", "This process's rank for environment-driven init (bootstrapFromEnvironment)."},
      {"BRAID_WORLD_SIZE", "", "Number of ranks for environment-driven init."},
      {"BRAID_ROOT", "",
       "host:port of the bootstrap root for environment-driven init: rank 0 listens there, others connect."},
      {"BRAID_SOCKET_IFNAME", "",
       "Network interface whose IPv4 address the bootstrap root and TCP transport listen on (as "
       "NCCL_SOCKET_IFNAME); default: the address of the host name, else 127.0.0.1."},
      {"BRAID_HOSTID", "",
       "This process's host name for Braid's bootstrap (as NCCL_HOSTID for NCCL), at most 63 bytes; unset: "
       "gethostname(). Ranks with the same name count as one host (shared memory, CUDA IPC), ranks with different "
       "names as different hosts (TCP, proxied connections), so processes of one machine can stand for several "
       "hosts; processes of different machines must not share a name. Longer than 63 bytes: bootstrap setup fails "
       "naming it."},
      {"BRAID_NET_IF", "",
       "Interfaces the NCCL net plugin (libnccl-net-braid.so) offers as devices, in NCCL_SOCKET_IFNAME's syntax "
       "(prefix list, `^` excludes, `=` exact names); unset: NCCL_SOCKET_IFNAME, else every interface that is up "
       "but loopback, docker* and virbr*, else loopback."},
      {"BRAID_NET_TRANSPORT", "tcp",
       "Data path of the NCCL net plugin's connections: `tcp` (striped sockets, BRAID_NET_NSOCKS x "
       "BRAID_NET_NTHREADS) or `ucx` (UCX tag messages over the transports UCX_TLS allows; a build with UCX only, "
       "else init fails with ncclInvalidUsage). Every rank must use the same value."},
      {"BRAID_NET_NSOCKS", "1",
       "Data sockets per helper thread of each NCCL net plugin connection on the TCP data path (as "
       "NCCL_NSOCKS_PERTHREAD); threads x sockets at most 64."},
      {"BRAID_NET_NTHREADS", "2",
       "Helper threads moving the payload of each NCCL net plugin connection on the TCP data path (as "
       "NCCL_SOCKET_NTHREADS), 1..16."},
      {"BRAID_NET_IDLE_TIMEOUT", "0",
       "NCCL net plugin: seconds a pending request may see no byte move before it fails with ncclSystemError; 0 (the "
       "default) waits as NCCL's own socket transport does. Dead peers are detected anyway: a closed or reset "
       "connection at once, a vanished host by TCP keepalive (about 40 s)."},
      {"BRAID_CC_POLICY", "fixed",
       "Congestion control of the TCP transport (runtime/congestion, docs/congestion.md): `fixed` is NCCL's Simple "
       "protocol over the network (BRAID_CC_CHUNK_MAX chunks, BRAID_CC_WINDOW unacknowledged per connection, every "
       "sender at once), the default: adaptive was slower on emulated hosts; `adaptive` adapts each peer's chunk and "
       "window to per-chunk RTT and TCP_INFO (AIMD), lets "
       "each receiver admit senders adaptively (every one until TCP times out, then AIMD down to BRAID_CC_CREDITS) "
       "and each sender feed BRAID_CC_ACTIVE_PEERS peers."},
      {"BRAID_CC_CHUNK_MIN", "64K", "Smallest chunk of the adaptive policy, bytes (K/M/G suffix); at least 1K."},
      {"BRAID_CC_CHUNK_MAX", "512K",
       "Largest chunk of the adaptive policy and the chunk of the fixed policy, bytes (NCCL: NCCL_BUFFSIZE 4 MiB / "
       "NCCL_STEPS 8); at most 64M."},
      {"BRAID_CC_WINDOW", "4M",
       "Most unacknowledged bytes per peer connection: the fixed policy's window (NCCL: 8 steps of 512 KiB) and the "
       "adaptive policy's ceiling. At least BRAID_CC_CHUNK_MAX, at most 1G."},
      {"BRAID_CC_CREDITS", "1",
       "Adaptive policy: the fewest senders a receiver admits at once. A receiver admits every sender until one "
       "reports TCP retransmission timeouts, then grants clear-to-send to half its senders, halving on each further "
       "report down to this floor and adding one per round of grants without one, back to every sender (AIMD; "
       "messages up to 64 KiB need no grant); `0` turns admission control off. 0..1024."},
      {"BRAID_CC_ADMIT", "0",
       "Adaptive policy: senders a receiver admits at the start; `0` (the default) admits every one (senders send "
       "without asking until a timeout is reported), k > 0 starts gated at max(k, BRAID_CC_CREDITS) senders, "
       "growing from there as after a report. 0..1024."},
      {"BRAID_CC_GRANT", "1M",
       "Adaptive policy: bytes per grant of clear-to-send; a sender that used its grant goes to the back of the "
       "receiver's queue. At least BRAID_CC_CHUNK_MIN."},
      {"BRAID_CC_ACTIVE_PEERS", "0",
       "Adaptive policy: peers a sender sends to at the same time, taken in the order their sends were posted (an "
       "all-to-all starts each rank at a different peer); `0` means all. 0..1024."},
      {"BRAID_TCP_CONGESTION", "",
       "TCP congestion control algorithm of the TCP transport's data connections (setsockopt TCP_CONGESTION: "
       "`cubic`, `bbr`, `reno`, ...); unset: the system's (net.ipv4.tcp_congestion_control). A name the kernel "
       "does not offer fails transport setup naming it."},
      {"BRAID_TCP_RTO_MIN", "0",
       "Shortest retransmission timeout of the TCP transport's data connections, µs (setsockopt TCP_RTO_MIN_US, "
       "Linux 6.15+; the kernel rounds up to its timer tick and accepts 2 ticks .. 200 ms); `0`: the kernel's "
       "(200 ms). A short floor is the classic remedy for incast collapse (Vasudevan et al., SIGCOMM'09). A value "
       "the kernel refuses fails transport setup naming it."},
      {"BRAID_CALL_CHECK", "rooted",
       "Which collective calls the communicator checks across ranks before any data moves (one 48-byte record "
       "to and from every peer: collective, count, datatype, reduction op, root; a mismatch fails every rank "
       "with an error naming it and leaves nothing behind): `rooted` checks broadcast, reduce and all-to-all-v "
       "(whose per-pair byte totals are compared too), `all` every collective, `off` none. The check costs one "
       "message round, about the latency of an 8-byte all-reduce, per checked call. Must be the same on every "
       "rank: communicator creation compares it and fails on every rank naming the ranks that differ."},
      {"BRAID_ALLTOALL", "auto",
       "All-to-all and all-to-all-v of the communicator: `auto` runs Tutel's two-dimensional hierarchical exchange "
       "(2DH: intra-node all-to-all, then one message per node pair across nodes) where the simulator predicts it "
       "faster than the flat exchange on BRAID_TOPO's topology at the call's bytes per peer (one decision per "
       "power-of-two size bucket; without a topology, or on one node, flat); `flat` always the direct exchange; `2dh` "
       "always 2DH (needs the node shape: the topology, BRAID_RANKS_PER_NODE or the hosts). A forced mode comes before "
       "the Pareto set of BRAID_TOPO for all-to-all. Must be the same on every rank."},
      {"BRAID_RANKS_PER_NODE", "",
       "Ranks per node for 2DH all-to-all (rank = node x this + local index, as Tutel's LOCAL_SIZE); must divide "
       "the rank count. The nodes of BRAID_TOPO's topology, when it has the rank count's GPUs, come first (a "
       "different value here is an error); unset and no such topology: the bootstrap's host names (ranks numbered "
       "host by host, the same count on every host)."},
      {"BRAID_ROUTING_ENGINE", "bisect",
       "How the synthesizer's routing stage minimizes the makespan: `bisect` (bisection on the bound, each step a "
       "satisfiability check; proves the optimum) or `optimize` (Z3's optimizer over the same model, kept for "
       "comparison; its time limit is not always honoured on large models)."},
      {"BRAID_TOPOLOGY", "",
       "NCCL tuner plugin: the machine NCCL runs on, a topology file (Braid YAML, NCCL topology XML, `nvidia-smi "
       "topo -m`, TACCL JSON) or a shipped name (`dgx-h100-x2`); unset: NCCL_TOPO_DUMP_FILE's XML, else the tuner "
       "leaves NCCL's table as it is (docs/nccl.md). NCCL-API shim: rank 0 of each communicator with the "
       "topology's GPU count synthesizes its Pareto set at init (libbraid_nccl_pareto.so) and sends it to the "
       "other ranks; its windows serve the calls BRAID_ALGO_DIR / MSCCL_XML_FILES do not."},
      {"BRAID_NCCL_PARETO_COLLS", "allreduce,allgather,reducescatter,alltoall",
       "NCCL-API shim with BRAID_TOPOLOGY: the collectives whose Pareto set rank 0 synthesizes, in order, "
       "separated by `,`; the others go to NCCL (or BRAID_ALGO_DIR). A name that is not one of these four is a "
       "warning and no set."},
      {"BRAID_NCCL_PARETO_TIME_LIMIT", "60",
       "NCCL-API shim with BRAID_TOPOLOGY: seconds rank 0 may spend on the Pareto set at communicator init, all "
       "collectives together (each gets an equal share of the time left, a quarter of it per synthesis); a "
       "collective not finished by then goes to NCCL. The other ranks wait that long plus 120 s when this is more "
       "than BRAID_TIMEOUT. Not a positive number of at most 1e6 s: a warning and the default."},
      {"BRAID_NCCL_PARETO_LIB", "",
       "NCCL-API shim with BRAID_TOPOLOGY: path of libbraid_nccl_pareto.so (the synthesizer, Z3); unset: the "
       "file beside libbraid_nccl.so, else the loader's search path. Missing: a warning and no Pareto set."},
      {"BRAID_NCCL_ACROSS_HOSTS", "host-driven",
       "NCCL-API shim: what runs Braid on a communicator whose ranks are on several hosts (the bootstrap's host "
       "names, BRAID_HOSTID): `host-driven` the host-driven CUDA transport (NCCL send/receive between ranks); "
       "`hierarchical` the device-resident executor, device-resident inside each host, proxied across hosts over a "
       "CPU transport (BRAID_TRANSPORT: `auto` or `tcp` TCP, `ucx` UCX; `threads` and `shm` are refused). Ranks on one "
       "host always use the device-resident executor. Must be the same on every rank. Another value, or a refused "
       "BRAID_TRANSPORT: a warning naming it and the communicator's calls go to NCCL."},
      {"BRAID_TUNER", "validated",
       "NCCL tuner plugin (libnccl-tuner-braid.so, and libnccl-net-braid.so, which carries the tuner too): "
       "`validated` moves NCCL off its own algorithm/protocol only where both Braid's candidate and NCCL's choice "
       "are simulated inside their calibrated size bands and the candidate wins by more than their known error; "
       "`model` wherever Braid's fastest prediction differs from NCCL's choice; `off` changes nothing (no model, no "
       "rules: NCCL keeps its choices; init still succeeds). Another value: a warning and `validated`. `braid tune -t` "
       "builds its table with this policy unless --policy is given (off and other values are refused there)."},
      {"BRAID_TUNER_RULES", "",
       "NCCL tuner plugin: rules file in NCCL's example-tuner CSV format that overrides Braid's model (first "
       "matching line wins); unset: NCCL_TUNER_CONFIG_FILE, else no rules (docs/nccl.md)."},
      {"BRAID_TUNER_MAX_SIM_BYTES", "1G",
       "NCCL tuner plugin: largest grid size (bytes, K/M/G suffix) simulated at init; larger sizes extend the last "
       "simulated segment. Smaller values make init faster; below 1M it warns and uses 1M."},
      {"BRAID_TUNER_MAX_SIM_RANKS", "32",
       "NCCL tuner plugin: above this many ranks nothing is simulated at init and every entry is NCCL's analytical "
       "model (ncclPredict) on Braid's topology; `0` never simulates."},
  };
  return params;
}

namespace {
const EnvParam* find(const char* name) {
  for (const EnvParam& p : envParams())
    if (std::strcmp(p.name, name) == 0) return &p;
  return nullptr;
}
}  // namespace

std::string envString(const char* name) {
  const EnvParam* param = find(name);
  if (param == nullptr) return "";
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return param->default_value;
  return value;
}

bool envIsSet(const char* name) {
  if (find(name) == nullptr) return false;
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

Result<int64_t> envInt(const char* name) {
  const std::string text = envString(name);
  if (text.empty()) return invalidArgument(std::string(name) + " is not set");
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0')
    return invalidArgument(std::string(name) + "=" + text + ": not an integer");
  return static_cast<int64_t>(value);
}

Result<double> envDouble(const char* name) {
  const std::string text = envString(name);
  if (text.empty()) return invalidArgument(std::string(name) + " is not set");
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // ERANGE: the number is out of double's range; strtod returns the nearest value (+-HUGE_VAL, which is +-inf,
  // or a number near 0), which is what a huge or tiny setting means.
  if ((errno != 0 && errno != ERANGE) || end == text.c_str() || *end != '\0')
    return invalidArgument(std::string(name) + "=" + text + ": not a number");
  return value;
}

double runtimeSpinMicroseconds() {
  Result<double> value = envDouble("BRAID_SPIN_US");
  if (value.isOk() && *value > kMaxSpinMicroseconds) {
    static std::atomic<bool> warned_high{false};
    if (!warned_high.exchange(true)) {
      BRAID_LOG(kWarn, "BRAID_SPIN_US={} is above the limit of {:.0f} µs; using {:.0f}", envString("BRAID_SPIN_US"),
                kMaxSpinMicroseconds, kMaxSpinMicroseconds);
    }
    return kMaxSpinMicroseconds;
  }
  if (value.isOk() && *value >= 0) return *value;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    BRAID_LOG(kWarn, "BRAID_SPIN_US={} is not a number of microseconds >= 0; using 50", envString("BRAID_SPIN_US"));
  }
  return 50.0;
}

Result<double> runtimeTimeoutSeconds() {
  Result<double> value = envDouble("BRAID_TIMEOUT");
  // `!(v > 0)` refuses NaN as well as 0 and negative values.
  if (!value.isOk() || !(*value > 0)) {
    return invalidArgument(
        fmt::format("BRAID_TIMEOUT={}: not a positive number of seconds (or inf)", envString("BRAID_TIMEOUT")));
  }
  return std::min(*value, kMaxTimeoutSeconds);
}

Result<double> resolveTimeoutSeconds(double option_s) {
  if (option_s == 0) return runtimeTimeoutSeconds();
  if (!(option_s > 0))
    return invalidArgument(fmt::format("timeout_s = {} is not a positive number of seconds", option_s));
  return std::min(option_s, kMaxTimeoutSeconds);
}

std::chrono::steady_clock::duration timeoutDuration(double seconds) {
  const double clamped = seconds > 0 ? std::min(seconds, kMaxTimeoutSeconds) : 0.0;
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(clamped));
}

}  // namespace braid
