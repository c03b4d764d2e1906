// nccl_net_benchmark: the Braid net plugin (libnccl-net-braid.so, loaded and driven as NCCL's proxy drives it)
// against a plain TCP socket pair moving the same bytes, between two processes on loopback, in the same run.
//
//   nccl_net_benchmark [--size BYTES] [--total BYTES] [--window N] [--repeat N] [--plugin PATH]
//                      [--transport tcp|ucx|tcp,ucx]     (BYTES: nccl-tests syntax, 4M = 4 MiB; --help: usage)
//
// The plugin side posts `window` isends / irecvs of `size` bytes ahead (NCCL keeps NCCL_STEPS = 8 per channel in
// flight) and re-posts one as each completes; the plain side writes / reads the same total with blocking
// send(2) / recv(2) of `size` bytes. `--transport` names the plugin's data paths to measure (BRAID_NET_TRANSPORT;
// default tcp; ucx uses the UCX transports UCX_TLS allows, as UCX reads it). The plugin runs (one per data path) and
// the plain run alternate `repeat` times (default 5) and each one's median run is reported, so one run disturbed by
// other load does not decide the ratio. Prints GB/s (1e9 bytes/s) of each, the ratio of each data path to the plain
// pair, and iperf3's number when iperf3 is installed. Exit status 1 when a run fails (a byte count or the plugin
// reports an error), 2 for bad arguments (a malformed or missing value, an unknown flag).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/text.h"
#include "nccl/abi/net_abi.h"

namespace {

namespace abi = braid::nccl_abi;

struct Options {
  size_t size = 4 << 20;
  size_t total = size_t{2} << 30;
  int window = 8;
  std::string plugin = std::string(BRAID_NCCL_PLUGIN_DIR) + "/libnccl-net-braid.so";
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool writeFull(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t got = write(fd, p, bytes);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

bool readFull(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = read(fd, p, bytes);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

// One side of the plugin run; returns the seconds from the first post to the last completion, < 0 on error.
double pluginSide(const Options& o, const abi::NetV11* net, bool sender, int channel) {
  void* ctx = nullptr;
  if (net->init(&ctx, 1, nullptr, nullptr, nullptr) != 0) return -1;
  char handle[abi::kNetHandleMaxSize] = {};
  void* comm = nullptr;
  void* listen = nullptr;
  if (!sender) {
    if (net->listen(ctx, 0, handle, &listen) != 0 || !writeFull(channel, handle, sizeof(handle))) return -1;
    while (comm == nullptr)
      if (net->accept(listen, &comm, nullptr) != 0) return -1;
  } else {
    if (!readFull(channel, handle, sizeof(handle))) return -1;
    while (comm == nullptr)
      if (net->connect(ctx, 0, handle, &comm, nullptr) != 0) return -1;
  }
  std::vector<std::vector<char>> bufs(o.window, std::vector<char>(o.size, 1));
  void* mh = nullptr;
  if (net->regMr(comm, bufs[0].data(), o.size, abi::kPtrHost, &mh) != 0) return -1;
  char go = 0;
  if (sender ? !readFull(channel, &go, 1) : !writeFull(channel, &go, 1)) return -1;  // both ends ready
  const size_t count = o.total / o.size;
  std::vector<void*> reqs(o.window, nullptr);
  size_t posted = 0, done = 0;
  const double start = now();
  while (done < count) {
    for (int w = 0; w < o.window; ++w) {
      if (reqs[w] == nullptr && posted < count) {
        int rc;
        if (sender) {
          rc = net->isend(comm, bufs[w].data(), o.size, 0, mh, nullptr, &reqs[w]);
        } else {
          void* data = bufs[w].data();
          size_t cap = o.size;
          int tag = 0;
          rc = net->irecv(comm, 1, &data, &cap, &tag, &mh, nullptr, &reqs[w]);
        }
        if (rc != 0) return -1;
        if (reqs[w] != nullptr) ++posted;
      }
      if (reqs[w] != nullptr) {
        int finished = 0, bytes = 0;
        if (net->test(reqs[w], &finished, &bytes) != 0) return -1;
        if (finished) {
          if (static_cast<size_t>(bytes) != o.size) return -1;
          reqs[w] = nullptr;
          ++done;
        }
      }
    }
  }
  const double seconds = now() - start;
  if (sender ? !readFull(channel, &go, 1) : !writeFull(channel, &go, 1)) return -1;  // receiver finished
  net->deregMr(comm, mh);
  sender ? net->closeSend(comm) : net->closeRecv(comm);
  if (listen != nullptr) net->closeListen(listen);
  net->finalize(ctx);
  return seconds;
}

// One side of the plain socket pair (same sizes, blocking I/O, TCP_NODELAY like the plugin's sockets).
double plainSide(const Options& o, bool sender, int channel) {
  int fd;
  if (!sender) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (bind(ls, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(ls, 1) != 0) return -1;
    getsockname(ls, reinterpret_cast<sockaddr*>(&sa), &len);
    if (!writeFull(channel, &sa, sizeof(sa))) return -1;
    fd = accept(ls, nullptr, nullptr);
    close(ls);
  } else {
    sockaddr_in sa{};
    if (!readFull(channel, &sa, sizeof(sa))) return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> buf(o.size, 1);
  char go = 0;
  if (sender ? !readFull(channel, &go, 1) : !writeFull(channel, &go, 1)) return -1;
  const size_t count = o.total / o.size;
  const double start = now();
  for (size_t i = 0; i < count; ++i) {
    if (sender ? !writeFull(fd, buf.data(), o.size) : !readFull(fd, buf.data(), o.size)) return -1;
  }
  const double seconds = now() - start;
  if (sender ? !readFull(channel, &go, 1) : !writeFull(channel, &go, 1)) return -1;
  close(fd);
  return seconds;
}

// Runs `side` in a forked sender and in this process (the receiver); returns the receiver's seconds.
template <class Side>
double runPair(Side side) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    _exit(side(true, sv[1]) < 0 ? 1 : 0);
  }
  close(sv[1]);
  const double seconds = side(false, sv[0]);
  close(sv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return seconds;
}

void iperf3Line() {
  if (std::system("command -v iperf3 >/dev/null 2>&1") != 0) {
    std::printf("iperf3: not installed\n");
    return;
  }
  std::system(
      "iperf3 -s -1 -p 52011 >/dev/null 2>&1 & sleep 0.5; iperf3 -c 127.0.0.1 -p 52011 -t 3 -f g | "
      "grep receiver");
}

// The comma list of --transport, each "tcp" or "ucx"; empty when an entry is neither.
std::vector<std::string> parseTransports(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string entry = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (entry != "tcp" && entry != "ucx") return {};
    out.push_back(entry);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "<median> GB/s (runs <min> .. <max>)" of runs of `bytes` each.
std::string rateText(double bytes, const std::vector<double>& seconds) {
  char text[128];
  std::snprintf(text, sizeof(text), "%.2f GB/s (runs %.2f .. %.2f)", bytes / median(seconds) / 1e9,
                bytes / *std::max_element(seconds.begin(), seconds.end()) / 1e9,
                bytes / *std::min_element(seconds.begin(), seconds.end()) / 1e9);
  return text;
}

constexpr const char* kUsage =
    "usage: %s [--size BYTES] [--total BYTES] [--window N] [--repeat N] [--plugin PATH] "
    "[--transport tcp|ucx|tcp,ucx]\n"
    "  BYTES in nccl-tests syntax (digits, optional K/M/G suffix, powers of 1024): --size 4M\n";

// A whole decimal int in [0, 1000]; nullopt otherwise.
std::optional<int> parseCount(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) return {};
  const int v = std::stoi(text);
  return v <= 1000 ? std::optional<int>(v) : std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int repeat = 5;
  std::vector<std::string> transports = {"tcp"};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(kUsage, argv[0]);
      return 0;
    }
    const bool known = flag == "--size" || flag == "--total" || flag == "--window" || flag == "--repeat" ||
                       flag == "--plugin" || flag == "--transport";
    if (!known) {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], flag.c_str());
      std::fprintf(stderr, kUsage, argv[0]);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    bool good = true;
    if (flag == "--size" || flag == "--total") {
      const std::optional<uint64_t> bytes = braid::parseNcclTestsSize(value);
      good = bytes.has_value();
      if (good) (flag == "--size" ? o.size : o.total) = static_cast<size_t>(*bytes);
    } else if (flag == "--window" || flag == "--repeat") {
      const std::optional<int> n = parseCount(value);
      good = n.has_value();
      if (good) (flag == "--window" ? o.window : repeat) = *n;
    } else if (flag == "--plugin") {
      o.plugin = value;
    } else {
      transports = parseTransports(value);
    }
    if (!good) {
      std::fprintf(stderr, "%s: %s %s: not a %s\n", argv[0], flag.c_str(), value.c_str(),
                   flag == "--size" || flag == "--total" ? "size (bytes, K/M/G suffix)" : "whole number 0..1000");
      return 2;
    }
  }
  if (o.size == 0 || o.size > (size_t{1} << 30) || o.total < o.size || o.window < 1 || o.window > 32 || repeat < 1 ||
      repeat > 101 || transports.empty()) {
    std::fprintf(stderr,
                 "need 0 < size <= 1 GiB, total >= size, 1 <= window <= 32, 1 <= repeat <= 101, --transport a comma "
                 "list of tcp and ucx\n");
    return 2;
  }
  setenv("BRAID_NET_IF", "lo", 0);
  void* lib = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  const auto* net = lib ? static_cast<const abi::NetV11*>(dlsym(lib, "ncclNetPlugin_v11")) : nullptr;
  if (net == nullptr) {
    std::fprintf(stderr, "cannot load ncclNetPlugin_v11 from %s: %s\n", o.plugin.c_str(), dlerror());
    return 1;
  }
  const double bytes = static_cast<double>(o.total / o.size * o.size);
  std::vector<std::vector<double>> plugin_runs(transports.size());
  std::vector<double> plain_runs;
  for (int r = 0; r < repeat; ++r) {
    for (size_t t = 0; t < transports.size(); ++t) {
      setenv("BRAID_NET_TRANSPORT", transports[t].c_str(), 1);  // read by init, in both processes
      const double plugin_s = runPair([&](bool sender, int ch) { return pluginSide(o, net, sender, ch); });
      if (plugin_s <= 0) {
        std::fprintf(stderr, "a plugin run over %s failed\n", transports[t].c_str());
        return 1;
      }
      plugin_runs[t].push_back(plugin_s);
    }
    const double plain_s = runPair([&](bool sender, int ch) { return plainSide(o, sender, ch); });
    if (plain_s <= 0) {
      std::fprintf(stderr, "a plain TCP run failed\n");
      return 1;
    }
    plain_runs.push_back(plain_s);
  }
  const char* tls = std::getenv("UCX_TLS");
  std::printf("message %zu B, window %d, %.0f MB moved per run, loopback, %d alternating runs each (medians)\n", o.size,
              o.window, bytes / 1e6, repeat);
  for (size_t t = 0; t < transports.size(); ++t) {
    std::printf(
        "braid net plugin, %s%s: %s\n", transports[t].c_str(),
        transports[t] == "ucx" ? (std::string(" (UCX_TLS=") + (tls != nullptr ? tls : "unset") + ")").c_str() : "",
        rateText(bytes, plugin_runs[t]).c_str());
  }
  std::printf("plain TCP pair: %s\n", rateText(bytes, plain_runs).c_str());
  for (size_t t = 0; t < transports.size(); ++t) {
    std::printf("ratio plugin %s / plain (medians): %.2f\n", transports[t].c_str(),
                median(plain_runs) / median(plugin_runs[t]));
  }
  iperf3Line();
  return 0;
}
