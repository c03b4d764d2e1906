// Test support for the net plugin: a harness that behaves like NCCL 2.28 (nccl_plugins.md §1.6).
//
//   * netPluginCandidates / openNetPlugin: NCCL_NET_PLUGIN's search rules (comma list; each entry dlopen'ed as
//     given, then as libnccl-net-<entry>.so when it has no '/' and is not already lib*.so);
//   * newest symbol first (ncclNetPlugin_v11 ... v6), as NCCL's plugin loader takes it;
//   * NetApi: one call sequence over the v11, v8 or v6 table (init, devices, getProperties, listen,
//     connect / accept with retries, regMr, isend / irecv / test, close, finalize);
//   * HandlePipes: the bootstrap's part, carrying 128-byte handles between forked ranks.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "abi/net_abi.h"

namespace braid::testing {

/// What NCCL's logger received in this process (captureLog appends one line per call).
inline std::string g_logged;
/// A NCCL log function (abi::Logger) that appends each formatted line to g_logged.
inline void captureLog(int, unsigned long, const char*, int, const char* fmt, ...) {
  char line[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof(line), fmt, args);
  va_end(args);
  g_logged += line;
  g_logged += '\n';
}

namespace abi = braid::nccl_abi;

/// The dlopen names NCCL tries for one NCCL_NET_PLUGIN value, in order.
inline std::vector<std::string> netPluginCandidates(const std::string& value) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string::npos) comma = value.size();
    const std::string entry = value.substr(pos, comma - pos);
    pos = comma + 1;
    if (entry.empty()) continue;
    out.push_back(entry);
    const bool is_lib = entry.rfind("lib", 0) == 0 && entry.size() > 3 && entry.substr(entry.size() - 3) == ".so";
    if (entry.find('/') == std::string::npos && !is_lib) out.push_back("libnccl-net-" + entry + ".so");
  }
  return out;
}

/// A loaded net plugin: the library and the newest table found.
struct LoadedNetPlugin {
  void* library = nullptr;
  int version = 0;  // 11 ... 6, 0 = none
  const void* table = nullptr;
  std::string opened;  // the name that dlopen accepted
};

/// Loads by NCCL's rules (RTLD_NOW | RTLD_LOCAL); version 0 when nothing loads. `max_version` limits the
/// symbols looked up (to drive an older table as an older NCCL would).
inline LoadedNetPlugin openNetPlugin(const std::string& value, int max_version = 11) {
  LoadedNetPlugin out;
  for (const std::string& name : netPluginCandidates(value)) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    for (int v = max_version; v >= 6; --v) {
      const std::string symbol = "ncclNetPlugin_v" + std::to_string(v);
      if (const void* table = dlsym(lib, symbol.c_str())) {
        out.library = lib;
        out.version = v;
        out.table = table;
        out.opened = name;
        return out;
      }
    }
    dlclose(lib);
  }
  return out;
}

inline std::string pluginPath() { return std::string(BRAID_NCCL_PLUGIN_DIR) + "/libnccl-net-braid.so"; }

/// One call sequence over any table version.
class NetApi {
 public:
  NetApi(int version, const void* table) : version_(version), table_(table) {}
  int version() const { return version_; }

  /// `logger`: NCCL's log function as the plugin receives it (NULL: none).
  int init(uint64_t comm_id, abi::Logger logger = nullptr) {
    if (version_ == 11) {
      abi::NetCommConfig config{abi::kNetTrafficClassUndef};
      return v11()->init(&ctx_, comm_id, &config, logger, nullptr);
    }
    if (version_ == 8) return v8()->init(logger);
    return v6()->init(logger);
  }
  int finalize() { return version_ == 11 ? v11()->finalize(ctx_) : 0; }
  int devices(int* n) {
    return version_ == 11 ? v11()->devices(n) : version_ == 8 ? v8()->devices(n) : v6()->devices(n);
  }
  /// speed and maxRecvs of device `dev` (the fields every version has).
  int properties(int dev, int* speed, int* max_recvs, std::string* name) {
    int rc;
    if (version_ == 11) {
      abi::NetPropertiesV11 p{};
      rc = v11()->getProperties(dev, &p);
      *speed = p.speed, *max_recvs = p.maxRecvs, *name = p.name ? p.name : "";
    } else if (version_ == 8) {
      abi::NetPropertiesV8 p{};
      rc = v8()->getProperties(dev, &p);
      *speed = p.speed, *max_recvs = p.maxRecvs, *name = p.name ? p.name : "";
    } else {
      abi::NetPropertiesV6 p{};
      rc = v6()->getProperties(dev, &p);
      *speed = p.speed, *max_recvs = p.maxRecvs, *name = p.name ? p.name : "";
    }
    return rc;
  }
  int listen(int dev, void* handle, void** comm) {
    if (version_ == 11) return v11()->listen(ctx_, dev, handle, comm);
    return version_ == 8 ? v8()->listen(dev, handle, comm) : v6()->listen(dev, handle, comm);
  }
  /// One connect call (may leave *comm NULL: call again).
  int connectOnce(int dev, void* handle, void** comm) {
    abi::NetDeviceHandle* dev_comm = nullptr;
    if (version_ == 11) return v11()->connect(ctx_, dev, handle, comm, &dev_comm);
    return version_ == 8 ? v8()->connect(dev, handle, comm, &dev_comm) : v6()->connect(dev, handle, comm);
  }
  int acceptOnce(void* listen, void** comm) {
    abi::NetDeviceHandle* dev_comm = nullptr;
    if (version_ == 11) return v11()->accept(listen, comm, &dev_comm);
    return version_ == 8 ? v8()->accept(listen, comm, &dev_comm) : v6()->accept(listen, comm);
  }
  /// Retries until the comm exists, an error, or `seconds` pass (returns -1 then).
  int connect(int dev, void* handle, void** comm, double seconds = 20) {
    return retry([&] { return connectOnce(dev, handle, comm); }, comm, seconds);
  }
  int accept(void* listen, void** comm, double seconds = 20) {
    return retry([&] { return acceptOnce(listen, comm); }, comm, seconds);
  }
  int regMr(void* comm, void* data, size_t size, int type, void** mh) {
    if (version_ == 11) return v11()->regMr(comm, data, size, type, mh);
    if (version_ == 8) return v8()->regMr(comm, data, size, type, mh);
    return v6()->regMr(comm, data, static_cast<int>(size), type, mh);
  }
  int deregMr(void* comm, void* mh) {
    return version_ == 11  ? v11()->deregMr(comm, mh)
           : version_ == 8 ? v8()->deregMr(comm, mh)
                           : v6()->deregMr(comm, mh);
  }
  int isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    if (version_ == 11) return v11()->isend(comm, data, size, tag, mh, nullptr, req);
    if (version_ == 8) return v8()->isend(comm, data, static_cast<int>(size), tag, mh, req);
    return v6()->isend(comm, data, static_cast<int>(size), tag, mh, req);
  }
  int irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
    if (version_ == 11) return v11()->irecv(comm, n, data, sizes, tags, mhs, nullptr, req);
    int narrow[8];
    for (int i = 0; i < n && i < 8; ++i) narrow[i] = static_cast<int>(sizes[i]);
    if (version_ == 8) return v8()->irecv(comm, n, data, narrow, tags, mhs, req);
    return v6()->irecv(comm, n, data, narrow, tags, mhs, req);
  }
  int test(void* req, int* done, int* sizes) {
    return version_ == 11  ? v11()->test(req, done, sizes)
           : version_ == 8 ? v8()->test(req, done, sizes)
                           : v6()->test(req, done, sizes);
  }
  /// Tests until done, an error, or `seconds` (returns -1 then).
  int wait(void* req, int* sizes, double seconds = 30) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      int done = 0;
      const int rc = test(req, &done, sizes);
      if (rc != 0 || done) return rc;
      if (std::chrono::steady_clock::now() > end) return -1;
    }
  }
  int closeSend(void* c) {
    return version_ == 11 ? v11()->closeSend(c) : version_ == 8 ? v8()->closeSend(c) : v6()->closeSend(c);
  }
  int closeRecv(void* c) {
    return version_ == 11 ? v11()->closeRecv(c) : version_ == 8 ? v8()->closeRecv(c) : v6()->closeRecv(c);
  }
  int closeListen(void* c) {
    return version_ == 11 ? v11()->closeListen(c) : version_ == 8 ? v8()->closeListen(c) : v6()->closeListen(c);
  }
  const abi::NetV11* v11() const { return static_cast<const abi::NetV11*>(table_); }
  const abi::NetV8* v8() const { return static_cast<const abi::NetV8*>(table_); }
  const abi::NetV6* v6() const { return static_cast<const abi::NetV6*>(table_); }
  void* ctx() const { return ctx_; }

 private:
  template <class Step>
  static int retry(Step step, void** comm, double seconds) {
    *comm = nullptr;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const int rc = step();
      if (rc != 0 || *comm != nullptr) return rc;
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  int version_;
  const void* table_;
  void* ctx_ = nullptr;
};

/// Pipes made before forking: pipe r carries handles written by rank r.
class HandlePipes {
 public:
  explicit HandlePipes(int n) : fds_(2 * n, -1) {
    for (int r = 0; r < n; ++r) {
      int p[2];
      if (pipe(p) == 0) fds_[2 * r] = p[0], fds_[2 * r + 1] = p[1];
    }
  }
  ~HandlePipes() {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  bool send(int from, const void* handle) {
    return write(fds_[2 * from + 1], handle, abi::kNetHandleMaxSize) == static_cast<ssize_t>(abi::kNetHandleMaxSize);
  }
  bool receive(int from, void* handle) {
    size_t have = 0;
    while (have < abi::kNetHandleMaxSize) {
      const ssize_t got = read(fds_[2 * from], static_cast<char*>(handle) + have, abi::kNetHandleMaxSize - have);
      if (got <= 0) return false;
      have += static_cast<size_t>(got);
    }
    return true;
  }

 private:
  std::vector<int> fds_;
};

/// A position-dependent byte pattern (differs per message through `seed`).
inline uint8_t patternByte(uint64_t seed, size_t i) {
  uint64_t x = (seed * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^ (i >> 7);
  return static_cast<uint8_t>(x ^ (x >> 29) ^ (x >> 43));
}
inline void fillPattern(std::vector<uint8_t>& buf, size_t size, uint64_t seed) {
  for (size_t i = 0; i < size; ++i) buf[i] = patternByte(seed, i);
}
/// The first index where `buf` differs from the pattern, or SIZE_MAX.
inline size_t checkPattern(const std::vector<uint8_t>& buf, size_t size, uint64_t seed) {
  for (size_t i = 0; i < size; ++i)
    if (buf[i] != patternByte(seed, i)) return i;
  return SIZE_MAX;
}

}  // namespace braid::testing
