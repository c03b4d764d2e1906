// The net plugin driven the way NCCL 2.28 drives it (tests/nccl/net_harness.h): loaded by NCCL's search rules,
// newest table first, then init / devices / getProperties / listen / connect / accept / regMr / isend / irecv /
// test / close / finalize across forked processes, every byte checked.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nccl/net_harness.h"
#include "transport/multirank.h"

namespace braid::testing {
namespace {

constexpr double kForkTimeoutS = 45;

#define NET_OK(expr)                                                                   \
  do {                                                                                 \
    const int rc_ = (expr);                                                            \
    if (rc_ != 0) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, rc_); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

// The data paths the transfer tests run over: tcp, and ucx in a build with UCX.
std::vector<std::string> dataPaths() {
#ifdef BRAID_HAVE_UCX
  return {"tcp", "ucx"};
#else
  return {"tcp"};
#endif
}

// A test run once per data path (the parameter is BRAID_NET_TRANSPORT's value).
class NetPluginPath : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(DataPath, NetPluginPath, ::testing::ValuesIn(dataPaths()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// In a child: BRAID_NET_TRANSPORT=`transport`; UCX over TCP loopback (UCX_TLS=tcp,self) unless the environment
// sets UCX_TLS (shared-memory transports need /dev/shm and lack peer-failure handling in UCX 1.13).
void useTransport(const std::string& transport) {
  setenv("BRAID_NET_TRANSPORT", transport.c_str(), 1);
  setenv("UCX_TLS", "tcp,self", /*overwrite=*/0);
}

// In a child: the plugin through table `version` (as a NCCL that knows no newer symbol), loopback devices, data
// over `transport`.
NetApi childApi(int version, const std::string& transport = "tcp") {
  setenv("BRAID_NET_IF", "lo", 1);
  useTransport(transport);
  LoadedNetPlugin p = openNetPlugin(pluginPath(), version);
  if (p.version != version) {
    std::fprintf(stderr, "could not load ncclNetPlugin_v%d from %s\n", version, pluginPath().c_str());
    std::_Exit(3);
  }
  return NetApi(p.version, p.table);
}

// The sizes every transfer test moves: 0 .. 1 GiB, the range NCCL's proxy hands a net plugin (the 1 GiB case not with
// BRAID_TEST_SMALL=1, which the sanitizer builds set: 2 GiB of buffers under ASan's shadow memory).
std::vector<size_t> transferSizes() {
  std::vector<size_t> sizes = {0, 1, 7, 4096, 65535, (64 << 10) + 3, (1 << 20) + 5, 4 << 20, 64 << 20};
  const char* small = std::getenv("BRAID_TEST_SMALL");
  if (small == nullptr || std::string(small) != "1") sizes.push_back(size_t{1} << 30);
  return sizes;
}

// Runs `body` in two forked ranks that share one HandlePipes (pipe r carries what rank r writes).
ForkResult runPair(const std::function<int(int rank, HandlePipes& pipes)>& body) {
  HandlePipes pipes(2);
  return runForked(
      2, [&](int rank) { return body(rank, pipes); }, kForkTimeoutS);
}

// One rank's end of a connection between two forked ranks: rank 0 listens and accepts (the receiving end), rank 1
// connects to the handle rank 0 wrote to pipe 0 (the sending end).
struct PairEnd {
  char handle[abi::kNetHandleMaxSize] = {};  // rank 0's listen handle; afterwards a token the ranks pass to signal
  void* listen = nullptr;                    // rank 0
  void* recv = nullptr;                      // rank 0
  void* send = nullptr;                      // rank 1
  void* comm() const { return recv != nullptr ? recv : send; }
};

// Connects `end` for `rank` as NCCL does: listen, the handle through the bootstrap, connect / accept with retries.
int connectPair(NetApi& net, int rank, HandlePipes& pipes, PairEnd& end) {
  if (rank == 0) {
    NET_OK(net.listen(0, end.handle, &end.listen));
    BRAID_CHILD_CHECK(end.listen != nullptr && pipes.send(0, end.handle));
    NET_OK(net.accept(end.listen, &end.recv));
  } else {
    BRAID_CHILD_CHECK(pipes.receive(0, end.handle));
    NET_OK(net.connect(0, end.handle, &end.send));
  }
  return 0;
}

// Posts one receive of at most `cap` bytes into `data` with `tag` (registration `mh`, or none when NULL); *req as
// irecv leaves it.
int irecvOne(NetApi& net, void* recv, void* data, size_t cap, int tag, void* mh, void** req) {
  return net.irecv(recv, 1, &data, &cap, &tag, mh != nullptr ? &mh : nullptr, req);
}

// Receives one message with `tag` into `buf` (at most `cap` bytes) and checks that it holds `size` bytes of the
// pattern `seed`.
int receivePattern(NetApi& net, void* recv, void* mh, int tag, std::vector<uint8_t>& buf, size_t cap, size_t size,
                   uint64_t seed) {
  void* req = nullptr;
  NET_OK(irecvOne(net, recv, buf.data(), cap, tag, mh, &req));
  BRAID_CHILD_CHECK(req != nullptr);
  int got = -1;
  NET_OK(net.wait(req, &got));
  BRAID_CHILD_CHECK(static_cast<size_t>(got) == size);
  const size_t bad = checkPattern(buf, size, seed);
  if (bad != SIZE_MAX) {
    std::fprintf(stderr, "size %zu: byte %zu differs\n", size, bad);
    return 1;
  }
  return 0;
}

// Sends `size` bytes from `data` with `tag` (isend called again while it hands out no request, as NCCL's proxy
// does) and waits until the send completed with `size` bytes.
int sendAndWait(NetApi& net, void* send, void* data, size_t size, int tag, void* mh) {
  void* req = nullptr;
  while (req == nullptr) NET_OK(net.isend(send, data, size, tag, mh, &req));
  int got = -1;
  NET_OK(net.wait(req, &got));
  BRAID_CHILD_CHECK(static_cast<size_t>(got) == size);
  return 0;
}

// Waits for `req` at most `seconds`: test()'s code (-1 when the time ran out); *took: the seconds waited.
int timedWait(NetApi& net, void* req, double seconds, double* took) {
  const auto start = std::chrono::steady_clock::now();
  int got = 0;
  const int rc = net.wait(req, &got, seconds);
  *took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rc;
}

// In a one-rank child: BRAID_NET_IF=`net_if` and the plugin's v11 table, NULL when it does not load.
const abi::NetV11* childTableV11(const char* net_if) {
  setenv("BRAID_NET_IF", net_if, 1);
  LoadedNetPlugin p = openNetPlugin(pluginPath());
  return p.version == 11 ? static_cast<const abi::NetV11*>(p.table) : nullptr;
}

// Rank 0 receives, rank 1 sends every size, one at a time, receive buffers one page larger than the send.
int pairBody(int rank, int version, const std::string& transport, HandlePipes& pipes) {
  NetApi net = childApi(version, transport);
  NET_OK(net.init(0x1000 + version));
  int ndev = 0;
  NET_OK(net.devices(&ndev));
  BRAID_CHILD_CHECK(ndev >= 1);
  int speed = 0, max_recvs = 0;
  std::string name;
  NET_OK(net.properties(0, &speed, &max_recvs, &name));
  BRAID_CHILD_CHECK(name == "lo" && speed > 0 && max_recvs >= 1);
  const std::vector<size_t> sizes = transferSizes();
  const size_t largest = sizes.back() + 4096;
  std::vector<uint8_t> buf(largest);
  PairEnd end;
  NET_OK(connectPair(net, rank, pipes, end));
  if (rank == 0) NET_OK(net.closeListen(end.listen));  // before the receive comm: any order
  void* mh = nullptr;
  NET_OK(net.regMr(end.comm(), buf.data(), buf.size(), abi::kPtrHost, &mh));
  if (rank == 0) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Tables <= v8 take int sizes up to NCCL's MAX_NET_SIZE (1 GiB): the largest receive is exactly that there.
      const size_t cap = std::min(sizes[k] + 4096, version <= 8 ? size_t{1} << 30 : SIZE_MAX);
      NET_OK(receivePattern(net, end.recv, mh, static_cast<int>(k), buf, cap, sizes[k], k + 1));
    }
    NET_OK(net.deregMr(end.recv, mh));
    NET_OK(net.closeRecv(end.recv));
  } else {
    for (size_t k = 0; k < sizes.size(); ++k) {
      fillPattern(buf, sizes[k], k + 1);
      NET_OK(sendAndWait(net, end.send, buf.data(), sizes[k], static_cast<int>(k), mh));
    }
    NET_OK(net.deregMr(end.send, mh));
    NET_OK(net.closeSend(end.send));
  }
  NET_OK(net.finalize());
  return 0;
}

TEST(NetPlugin, LoadsNewestSymbolFromFullPathAndCommaList) {
  LoadedNetPlugin p = openNetPlugin(pluginPath());
  ASSERT_EQ(p.version, 11) << dlerror();
  EXPECT_STREQ(static_cast<const abi::NetV11*>(p.table)->name, "Braid");
  LoadedNetPlugin q = openNetPlugin("/nonexistent/libnccl-net-none.so," + pluginPath());
  EXPECT_EQ(q.version, 11);
  EXPECT_EQ(q.opened, pluginPath());
  EXPECT_EQ(openNetPlugin("braid-does-not-exist").version, 0);
  LoadedNetPlugin old = openNetPlugin(pluginPath(), 8);
  EXPECT_EQ(old.version, 8);
}

// NCCL_NET_PLUGIN=braid with the library folder on LD_LIBRARY_PATH: a fresh process (the loader reads
// LD_LIBRARY_PATH at start) runs NetPluginChild.LoadsByShortName.
TEST(NetPlugin, LoadsByShortNameThroughLdLibraryPath) {
  const std::string command = std::string("env LD_LIBRARY_PATH=") + BRAID_NCCL_PLUGIN_DIR +
                              " NCCL_NET_PLUGIN=braid BRAID_TEST_NET_CHILD=1 /proc/" + std::to_string(getpid()) +
                              "/exe --gtest_filter=NetPluginChild.LoadsByShortName >/dev/null 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

TEST(NetPluginChild, LoadsByShortName) {
  if (std::getenv("BRAID_TEST_NET_CHILD") == nullptr) GTEST_SKIP() << "run by LoadsByShortNameThroughLdLibraryPath";
  LoadedNetPlugin p = openNetPlugin(std::getenv("NCCL_NET_PLUGIN"));
  EXPECT_EQ(p.version, 11);
  EXPECT_EQ(p.opened, "libnccl-net-braid.so");
}

TEST_P(NetPluginPath, TwoRanksEverySizeV11) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return pairBody(rank, 11, GetParam(), pipes); });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

TEST_P(NetPluginPath, TwoRanksEverySizeV8) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return pairBody(rank, 8, GetParam(), pipes); });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

TEST_P(NetPluginPath, TwoRanksEverySizeV6) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return pairBody(rank, 6, GetParam(), pipes); });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// 32 isends outstanding before the receiver posts anything; grouped receives of 8 tags taken out of order.
int outstandingBody(int rank, const std::string& transport, HandlePipes& pipes) {
  NetApi net = childApi(11, transport);
  NET_OK(net.init(7));
  constexpr int kMessages = 64;  // 8 grouped receives of 8
  constexpr int kGroup = 8;
  auto sizeOf = [](int m) { return static_cast<size_t>(1000 + 7919 * m); };
  PairEnd end;
  NET_OK(connectPair(net, rank, pipes, end));
  if (rank == 0) {
    void* recv = end.recv;
    std::vector<std::vector<uint8_t>> bufs(kMessages, std::vector<uint8_t>(sizeOf(kMessages) + 100));
    void* mh = nullptr;
    NET_OK(net.regMr(recv, bufs[0].data(), bufs[0].size(), abi::kPtrHost, &mh));
    usleep(200 * 1000);  // let the sender post its 32 first
    std::vector<void*> reqs;
    for (int g = 0; g < kMessages / kGroup; ++g) {
      void* data[kGroup];
      size_t caps[kGroup];
      int tags[kGroup];
      void* mhs[kGroup];
      for (int i = 0; i < kGroup; ++i) {
        const int m = g * kGroup + (kGroup - 1 - i);  // tags listed in reverse: matching is by tag
        data[i] = bufs[m].data();
        caps[i] = bufs[m].size();
        tags[i] = m % kGroup;
        mhs[i] = mh;
      }
      void* req = nullptr;
      NET_OK(net.irecv(recv, kGroup, data, caps, tags, mhs, &req));
      BRAID_CHILD_CHECK(req != nullptr);
      reqs.push_back(req);
    }
    for (int g = 0; g < kMessages / kGroup; ++g) {
      int sizes[kGroup] = {};
      NET_OK(net.wait(reqs[g], sizes));
      for (int i = 0; i < kGroup; ++i) {
        const int m = g * kGroup + (kGroup - 1 - i);
        BRAID_CHILD_CHECK(static_cast<size_t>(sizes[i]) == sizeOf(m));
        BRAID_CHILD_CHECK(checkPattern(bufs[m], sizeOf(m), 100 + m) == SIZE_MAX);
      }
    }
    // 32 receives outstanding fill the comm: the 33rd returns a NULL request.
    std::vector<void*> posted;
    std::vector<uint8_t> sink(16);
    for (int i = 0; i < abi::kNetMaxRequests + 1; ++i) {
      void* req = nullptr;
      NET_OK(irecvOne(net, recv, sink.data(), sink.size(), 0, mh, &req));
      if (i < abi::kNetMaxRequests) {
        BRAID_CHILD_CHECK(req != nullptr);
      } else {
        BRAID_CHILD_CHECK(req == nullptr);
      }
    }
    NET_OK(net.deregMr(recv, mh));
    NET_OK(net.closeRecv(recv));  // with receives pending
    NET_OK(net.closeListen(end.listen));
    BRAID_CHILD_CHECK(pipes.send(0, end.handle));  // the sender may close now
  } else {
    void* send = end.send;
    std::vector<std::vector<uint8_t>> bufs(kMessages);
    for (int m = 0; m < kMessages; ++m) {
      bufs[m].resize(sizeOf(m));
      fillPattern(bufs[m], sizeOf(m), 100 + m);
    }
    void* mh = nullptr;
    NET_OK(net.regMr(send, bufs[0].data(), bufs[0].size(), abi::kPtrHost, &mh));
    std::vector<void*> reqs(kMessages, nullptr);
    for (int m = 0; m < kMessages; ++m) {
      while (reqs[m] == nullptr) NET_OK(net.isend(send, bufs[m].data(), sizeOf(m), m % kGroup, mh, &reqs[m]));
    }
    for (int m = 0; m < kMessages; ++m) {
      int size = -1;
      NET_OK(net.wait(reqs[m], &size));
      BRAID_CHILD_CHECK(static_cast<size_t>(size) == sizeOf(m));
    }
    BRAID_CHILD_CHECK(pipes.receive(0, end.handle));  // the receiver has finished
    NET_OK(net.deregMr(send, mh));
    NET_OK(net.closeSend(send));
  }
  NET_OK(net.finalize());
  return 0;
}

TEST_P(NetPluginPath, OutstandingRequestsAndGroupedReceives) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return outstandingBody(rank, GetParam(), pipes); });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// Four ranks in a ring (rank r sends to r+1, receives from r-1), each its own communicator context, 4 MiB.
TEST_P(NetPluginPath, FourRankRing) {
  constexpr int kRanks = 4;
  HandlePipes pipes(kRanks);
  ForkResult r = runForked(
      kRanks,
      [&](int rank) {
        NetApi net = childApi(11, GetParam());
        NET_OK(net.init(0xabc0 + rank));
        char mine[abi::kNetHandleMaxSize] = {}, next[abi::kNetHandleMaxSize] = {};
        void* listen = nullptr;
        NET_OK(net.listen(0, mine, &listen));
        BRAID_CHILD_CHECK(pipes.send(rank, mine));
        BRAID_CHILD_CHECK(pipes.receive((rank + 1) % kRanks, next));
        void* send = nullptr;
        void* recv = nullptr;
        // Interleaved retries, as NCCL's proxy progresses both ends.
        for (int spin = 0; (send == nullptr || recv == nullptr) && spin < 2000000; ++spin) {
          if (send == nullptr) NET_OK(net.connectOnce(0, next, &send));
          if (recv == nullptr) NET_OK(net.acceptOnce(listen, &recv));
        }
        BRAID_CHILD_CHECK(send != nullptr && recv != nullptr);
        const size_t size = 4 << 20;
        std::vector<uint8_t> out(size), in(size);
        fillPattern(out, size, 500 + rank);
        void *smh = nullptr, *rmh = nullptr;
        NET_OK(net.regMr(send, out.data(), size, abi::kPtrHost, &smh));
        NET_OK(net.regMr(recv, in.data(), size, abi::kPtrHost, &rmh));
        void *rreq = nullptr, *sreq = nullptr;
        NET_OK(irecvOne(net, recv, in.data(), size, 9, rmh, &rreq));
        NET_OK(net.isend(send, out.data(), size, 9, smh, &sreq));
        BRAID_CHILD_CHECK(rreq != nullptr && sreq != nullptr);
        // Both requests polled, as NCCL's proxy polls every request it has: a receive whose header arrives after
        // irecv starts at a test() (NCCL's socket transport too reads sizes in test()).
        int sent = -1, got = -1;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while ((sreq != nullptr || rreq != nullptr) && std::chrono::steady_clock::now() < end) {
          int done = 0;
          if (sreq != nullptr) NET_OK(net.test(sreq, &done, &sent));
          if (done) sreq = nullptr;
          done = 0;
          if (rreq != nullptr) NET_OK(net.test(rreq, &done, &got));
          if (done) rreq = nullptr;
        }
        BRAID_CHILD_CHECK(sreq == nullptr && rreq == nullptr);
        BRAID_CHILD_CHECK(static_cast<size_t>(sent) == size && static_cast<size_t>(got) == size);
        BRAID_CHILD_CHECK(checkPattern(in, size, 500 + (rank + kRanks - 1) % kRanks) == SIZE_MAX);
        NET_OK(net.deregMr(send, smh));
        NET_OK(net.deregMr(recv, rmh));
        NET_OK(net.closeSend(send));
        NET_OK(net.closeListen(listen));
        NET_OK(net.closeRecv(recv));
        NET_OK(net.finalize());
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// Many connects called before any accept: each connect returns NULL until done, then 16 accepts find them (in
// the reverse order). The sender posts an isend on every comm and polls them all, as NCCL's proxy does: over UCX a
// send cannot start before its receiver accepted and sent its worker address.
TEST_P(NetPluginPath, ConnectsBeforeAccepts) {
  constexpr int kConns = 16;
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(99));
    std::vector<std::vector<char>> handles(kConns, std::vector<char>(abi::kNetHandleMaxSize));
    if (rank == 0) {
      std::vector<void*> listens(kConns);
      for (int i = 0; i < kConns; ++i) {
        NET_OK(net.listen(0, handles[i].data(), &listens[i]));
        BRAID_CHILD_CHECK(pipes.send(0, handles[i].data()));
      }
      char go[abi::kNetHandleMaxSize];
      BRAID_CHILD_CHECK(pipes.receive(1, go));  // the sender has connected everything
      for (int i = kConns - 1; i >= 0; --i) {
        void* recv = nullptr;
        NET_OK(net.accept(listens[i], &recv));
        int value = -1;
        void* mh = nullptr;
        NET_OK(net.regMr(recv, &value, sizeof(value), abi::kPtrHost, &mh));
        void* req = nullptr;
        NET_OK(irecvOne(net, recv, &value, sizeof(value), 0, mh, &req));
        int got = 0;
        NET_OK(net.wait(req, &got));
        BRAID_CHILD_CHECK(got == 4 && value == i);
        NET_OK(net.deregMr(recv, mh));
        NET_OK(net.closeRecv(recv));
        NET_OK(net.closeListen(listens[i]));
      }
    } else {
      std::vector<void*> sends(kConns, nullptr);
      for (int i = 0; i < kConns; ++i) BRAID_CHILD_CHECK(pipes.receive(0, handles[i].data()));
      int pending = kConns;
      for (int spin = 0; pending > 0 && spin < 1000000; ++spin) {
        for (int i = 0; i < kConns; ++i) {
          if (sends[i] != nullptr) continue;
          NET_OK(net.connectOnce(0, handles[i].data(), &sends[i]));
          if (sends[i] != nullptr) --pending;
        }
      }
      BRAID_CHILD_CHECK(pending == 0);
      char go[abi::kNetHandleMaxSize] = {};
      BRAID_CHILD_CHECK(pipes.send(1, go));
      std::vector<int> values(kConns);
      std::vector<void*> reqs(kConns, nullptr);
      for (int i = 0; i < kConns; ++i) {
        values[i] = i;
        NET_OK(net.isend(sends[i], &values[i], sizeof(int), 0, nullptr, &reqs[i]));
        BRAID_CHILD_CHECK(reqs[i] != nullptr);
      }
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (int left = kConns; left > 0 && std::chrono::steady_clock::now() < end;) {
        for (int i = 0; i < kConns; ++i) {
          if (reqs[i] == nullptr) continue;
          int done = 0, got = 0;
          NET_OK(net.test(reqs[i], &done, &got));
          if (done) {
            BRAID_CHILD_CHECK(got == static_cast<int>(sizeof(int)));
            reqs[i] = nullptr;
            --left;
          }
        }
      }
      for (void* req : reqs) BRAID_CHILD_CHECK(req == nullptr);
      for (int i = 0; i < kConns; ++i) NET_OK(net.closeSend(sends[i]));
    }
    NET_OK(net.finalize());
    return 0;
  });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// regMr refuses device memory; iflush is a request done at once; the optional-completion sentinel still gets a
// pollable request; a message larger than its buffer is a usage error; setNetAttr is accepted.
TEST_P(NetPluginPath, MemoryTypesFlushSentinelAndTruncation) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(5));
    abi::NetAttrV11 attr;
    std::memset(&attr, 0xff, sizeof(attr));
    attr.sendCommAttr.maxFlowsPerPeer = 4;
    NET_OK(net.v11()->setNetAttr(net.ctx(), &attr));
    std::vector<uint8_t> buf(1 << 16);
    PairEnd end;
    NET_OK(connectPair(net, rank, pipes, end));
    if (rank == 0) {
      void* recv = end.recv;
      void* mh = reinterpret_cast<void*>(0x77);
      BRAID_CHILD_CHECK(net.regMr(recv, buf.data(), buf.size(), abi::kPtrCuda, &mh) != 0 && mh == nullptr);
      BRAID_CHILD_CHECK(net.v11()->regMrDmaBuf(recv, buf.data(), buf.size(), abi::kPtrDmaBuf, 0, 3, &mh) != 0);
      NET_OK(net.regMr(recv, buf.data(), buf.size(), abi::kPtrHost, &mh));
      void* req = abi::kOptionalRecvCompletion;
      NET_OK(irecvOne(net, recv, buf.data(), 100, 1, mh, &req));
      BRAID_CHILD_CHECK(req != nullptr && req != abi::kOptionalRecvCompletion);
      int got = 0;
      NET_OK(net.wait(req, &got));
      BRAID_CHILD_CHECK(got == 100 && checkPattern(buf, 100, 1) == SIZE_MAX);
      void* data = buf.data();
      int fsize = 100;
      void* freq = nullptr;
      NET_OK(net.v11()->iflush(recv, 1, &data, &fsize, &mh, &freq));
      int done = 0;
      NET_OK(net.test(freq, &done, nullptr));
      BRAID_CHILD_CHECK(done == 1);
      req = nullptr;  // the next message has 200 bytes
      NET_OK(irecvOne(net, recv, buf.data(), 10, 1, mh, &req));
      BRAID_CHILD_CHECK(net.wait(req, &got) == abi::kInvalidUsage);
      NET_OK(net.deregMr(recv, mh));
      NET_OK(net.closeRecv(recv));
      NET_OK(net.closeListen(end.listen));
      BRAID_CHILD_CHECK(pipes.send(0, end.handle));  // the sender may close now
    } else {
      fillPattern(buf, buf.size(), 1);
      for (size_t size : {size_t{100}, size_t{200}}) NET_OK(sendAndWait(net, end.send, buf.data(), size, 1, nullptr));
      BRAID_CHILD_CHECK(pipes.receive(0, end.handle));  // the receiver has finished
      NET_OK(net.closeSend(end.send));
    }
    NET_OK(net.finalize());
    return 0;
  });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// A peer SIGKILLed mid-transfer: the survivor's pending requests fail with ncclSystemError, quickly.
int killedPeerBody(int rank, int victim, const std::string& transport, HandlePipes& pipes) {
  setenv("BRAID_TIMEOUT", "5", 1);
  NetApi net = childApi(11, transport);
  NET_OK(net.init(66));
  const size_t size = 64 << 20;
  std::vector<uint8_t> buf(size);
  PairEnd end;
  NET_OK(connectPair(net, rank, pipes, end));
  void* comm = end.comm();
  void* req = nullptr;
  // The receiver posts late (its socket buffers fill, the sender stalls mid-message); the victim dies while the
  // message is half way.
  if (rank == 1) NET_OK(net.isend(comm, buf.data(), size, 0, nullptr, &req));
  if (rank == victim) {
    usleep(100 * 1000);
    killSelf();
  }
  if (rank == 0) {
    usleep(300 * 1000);
    NET_OK(irecvOne(net, comm, buf.data(), size, 0, nullptr, &req));
  }
  BRAID_CHILD_CHECK(req != nullptr);
  double took = 0;
  const int rc = timedWait(net, req, 20, &took);
  if (rc != abi::kSystemError || took > 6) {
    std::fprintf(stderr, "survivor: test returned %d after %.1f s\n", rc, took);
    return 1;
  }
  // Later calls on the comm fail too, without a hang.
  void* again = nullptr;
  BRAID_CHILD_CHECK(rank == 0
                        ? net.irecv(comm, 1, reinterpret_cast<void**>(&buf), nullptr, nullptr, nullptr, &again) != 0
                        : net.isend(comm, buf.data(), 1, 0, nullptr, &again) != 0);
  NET_OK(rank == 0 ? net.closeRecv(comm) : net.closeSend(comm));
  if (end.listen != nullptr) NET_OK(net.closeListen(end.listen));
  NET_OK(net.finalize());
  return 0;
}

TEST_P(NetPluginPath, SenderKilledFailsReceiver) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return killedPeerBody(rank, 1, GetParam(), pipes); });
  EXPECT_TRUE(r.ranks.size() == 2 && r.ranks[0].ok() && r.ranks[1].signal == SIGKILL) << r.summary();
}

TEST_P(NetPluginPath, ReceiverKilledFailsSender) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) { return killedPeerBody(rank, 0, GetParam(), pipes); });
  EXPECT_TRUE(r.ranks.size() == 2 && r.ranks[1].ok() && r.ranks[0].signal == SIGKILL) << r.summary();
}

// Init fails cleanly (NCCL then falls back to its own plugins) when the interface selection matches nothing.
TEST(NetPlugin, InitFailsOnUnknownInterface) {
  ForkResult r = runForked(
      1,
      [&](int) {
        const abi::NetV11* net = childTableV11("=no-such-if0");
        BRAID_CHILD_CHECK(net != nullptr);
        void* ctx = nullptr;
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, nullptr, nullptr) == abi::kInvalidUsage && ctx == nullptr);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// The int-size adapters of tables <= v8 refuse a negative size with ncclInvalidArgument and a WARN line that starts
// with "NET/Braid:", as every line of the plugin does (docs/nccl.md).
TEST(NetPlugin, V8NegativeSizesAreRefusedWithTheTag) {
  ForkResult r = runForked(
      1,
      [&](int) {
        setenv("BRAID_NET_IF", "lo", 1);
        LoadedNetPlugin p = openNetPlugin(pluginPath(), 8);
        BRAID_CHILD_CHECK(p.version == 8);
        const auto* net = static_cast<const abi::NetV8*>(p.table);
        BRAID_CHILD_CHECK(net->init(&captureLog) == abi::kSuccess);
        g_logged.clear();  // init's INFO lines
        void* request = nullptr;
        BRAID_CHILD_CHECK(net->isend(nullptr, nullptr, -5, 0, nullptr, &request) == abi::kInvalidArgument);
        BRAID_CHILD_CHECK(g_logged == "NET/Braid: isend: size -5 is negative or above 1 GiB (struct version <= 8)\n");
        g_logged.clear();
        int size = -7;
        int tag = 0;
        void* data = nullptr;
        void* mhandle = nullptr;
        BRAID_CHILD_CHECK(net->irecv(nullptr, 1, &data, &size, &tag, &mhandle, &request) == abi::kInvalidArgument);
        BRAID_CHILD_CHECK(g_logged == "NET/Braid: irecv: size -7 is negative or above 1 GiB (struct version <= 8)\n");
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// Socket / thread counts out of range are a usage error at init, not a crash later.
TEST(NetPlugin, InitRejectsBadSocketCounts) {
  ForkResult r = runForked(
      1,
      [&](int) {
        const abi::NetV11* net = childTableV11("lo");
        BRAID_CHILD_CHECK(net != nullptr);
        void* ctx = nullptr;
        for (const char* threads : {"0", "17", "abc"}) {
          setenv("BRAID_NET_NTHREADS", threads, 1);
          BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, nullptr, nullptr) != abi::kSuccess && ctx == nullptr);
        }
        setenv("BRAID_NET_NTHREADS", "8", 1);
        setenv("BRAID_NET_NSOCKS", "9", 1);  // 72 sockets
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, nullptr, nullptr) == abi::kInvalidUsage);
        setenv("BRAID_NET_NSOCKS", "8", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, nullptr, nullptr) == abi::kSuccess && ctx != nullptr);
        BRAID_CHILD_CHECK(net->finalize(ctx) == abi::kSuccess);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// A live peer that never sends: the pending receive fails with ncclSystemError after BRAID_TIMEOUT, no hang.
TEST_P(NetPluginPath, SilentPeerTimesOut) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    setenv("BRAID_NET_IDLE_TIMEOUT", "1", 1);
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(3));
    PairEnd end;
    NET_OK(connectPair(net, rank, pipes, end));
    if (rank == 0) {
      int value = 0;
      void* req = nullptr;
      NET_OK(irecvOne(net, end.recv, &value, sizeof(value), 0, nullptr, &req));
      double took = 0;
      const int rc = timedWait(net, req, 10, &took);
      BRAID_CHILD_CHECK(rc == abi::kSystemError && took > 0.5 && took < 3);
      BRAID_CHILD_CHECK(pipes.send(0, end.handle));  // the sender may go
      NET_OK(net.closeRecv(end.recv));
      NET_OK(net.closeListen(end.listen));
    } else {
      BRAID_CHILD_CHECK(pipes.receive(0, end.handle));
      NET_OK(net.closeSend(end.send));
    }
    NET_OK(net.finalize());
    return 0;
  });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// A handle NCCL's bootstrap corrupted (or another Braid version wrote) is an error from connect, whatever bytes
// sit where a connect in progress keeps its state: never a crash.
TEST_P(NetPluginPath, GarbageHandlesAreRefusedNotFollowed) {
  ForkResult r = runForked(
      1,
      [&](int) {
        useTransport(GetParam());
        const abi::NetV11* net = childTableV11("lo");
        BRAID_CHILD_CHECK(net != nullptr);
        void* ctx = nullptr;
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, nullptr, nullptr) == abi::kSuccess);
        uint32_t seed = 12345;
        for (int fill = 0; fill < 4; ++fill) {
          unsigned char handle[abi::kNetHandleMaxSize];
          for (unsigned char& b : handle) {
            seed = seed * 1664525u + 1013904223u;
            b = fill == 0 ? 0xff : fill == 1 ? 0x00 : static_cast<unsigned char>(seed >> 24);
          }
          void* comm = nullptr;
          abi::NetDeviceHandle* dev_comm = nullptr;
          BRAID_CHILD_CHECK(net->connect(ctx, 0, handle, &comm, &dev_comm) == abi::kInvalidArgument);
          BRAID_CHILD_CHECK(comm == nullptr);
        }
        BRAID_CHILD_CHECK(net->finalize(ctx) == abi::kSuccess);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// A sender that closes on purpose is no dead peer: its goodbye lets the receiver take every message it announced,
// posted after the close; a receive beyond them fails with ncclSystemError at once, not after a timeout.
TEST_P(NetPluginPath, SenderCloseBeforeReceivesIsNoFailure) {
  const std::vector<size_t> sizes = {0, 1, 4093};  // below UCX's rendezvous threshold: sends complete unreceived
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(21));
    std::vector<uint8_t> buf(8192);
    PairEnd end;
    NET_OK(connectPair(net, rank, pipes, end));
    if (rank == 0) {
      BRAID_CHILD_CHECK(pipes.receive(1, end.handle));  // the sender has closed
      for (size_t k = 0; k < sizes.size(); ++k) {
        NET_OK(receivePattern(net, end.recv, nullptr, static_cast<int>(k), buf, buf.size(), sizes[k], 40 + k));
      }
      void* req = nullptr;
      NET_OK(irecvOne(net, end.recv, buf.data(), buf.size(), 0, nullptr, &req));
      double took = 0;
      const int rc = timedWait(net, req, 10, &took);
      BRAID_CHILD_CHECK(rc == abi::kSystemError && took < 1);
      NET_OK(net.closeRecv(end.recv));
      NET_OK(net.closeListen(end.listen));
    } else {
      std::vector<std::vector<uint8_t>> out(sizes.size());
      for (size_t k = 0; k < sizes.size(); ++k) {
        out[k].resize(sizes[k] + 1);
        fillPattern(out[k], sizes[k], 40 + k);
        NET_OK(sendAndWait(net, end.send, out[k].data(), sizes[k], static_cast<int>(k), nullptr));
      }
      NET_OK(net.closeSend(end.send));
      BRAID_CHILD_CHECK(pipes.send(1, end.handle));
    }
    NET_OK(net.finalize());
    return 0;
  });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// A receiver that closes on purpose while a large send waits for it: the send fails with ncclSystemError within
// seconds (at most kPeerCloseGraceS after the goodbye, plus the time to see it), never hangs.
TEST_P(NetPluginPath, ReceiverCloseFailsAPendingSend) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(22));
    PairEnd end;
    NET_OK(connectPair(net, rank, pipes, end));
    if (rank == 0) {
      BRAID_CHILD_CHECK(pipes.receive(1, end.handle));  // the send is posted
      NET_OK(net.closeRecv(end.recv));
      NET_OK(net.closeListen(end.listen));
    } else {
      void* send = end.send;
      std::vector<uint8_t> buf(64 << 20);
      void* req = nullptr;
      NET_OK(net.isend(send, buf.data(), buf.size(), 0, nullptr, &req));
      BRAID_CHILD_CHECK(req != nullptr);
      for (int i = 0; i < 100; ++i) {  // some bytes move before the receiver closes
        int done = 0;
        NET_OK(net.test(req, &done, nullptr));
        BRAID_CHILD_CHECK(done == 0);
      }
      BRAID_CHILD_CHECK(pipes.send(1, end.handle));
      double took = 0;
      const int rc = timedWait(net, req, 20, &took);
      if (rc != abi::kSystemError || took > 4) {
        std::fprintf(stderr, "sender: test returned %d after %.1f s\n", rc, took);
        return 1;
      }
      NET_OK(net.closeSend(send));
    }
    NET_OK(net.finalize());
    return 0;
  });
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// BRAID_NET_TRANSPORT: an unknown value, and `ucx` in a build without UCX, fail init with ncclInvalidUsage and a
// line naming the variable; `tcp` and (with UCX) `ucx` initialise.
TEST(NetPlugin, TransportVariableIsChecked) {
  ForkResult r = runForked(
      1,
      [&](int) {
        setenv("UCX_TLS", "tcp,self", 0);
        const abi::NetV11* net = childTableV11("lo");
        BRAID_CHILD_CHECK(net != nullptr);
        void* ctx = nullptr;
        setenv("BRAID_NET_TRANSPORT", "rdma", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, &captureLog, nullptr) == abi::kInvalidUsage && ctx == nullptr);
        BRAID_CHILD_CHECK(g_logged.find("BRAID_NET_TRANSPORT=rdma") != std::string::npos);
        g_logged.clear();
        setenv("BRAID_NET_TRANSPORT", "UCX", 1);
        const int rc = net->init(&ctx, 2, nullptr, &captureLog, nullptr);
#ifdef BRAID_HAVE_UCX
        BRAID_CHILD_CHECK(rc == abi::kSuccess && ctx != nullptr);
        BRAID_CHILD_CHECK(net->finalize(ctx) == abi::kSuccess);
#else
        BRAID_CHILD_CHECK(rc == abi::kInvalidUsage && ctx == nullptr);
        BRAID_CHILD_CHECK(g_logged.find("BRAID_NET_TRANSPORT=ucx") != std::string::npos);
        BRAID_CHILD_CHECK(g_logged.find("without UCX") != std::string::npos);
#endif
        setenv("BRAID_NET_TRANSPORT", "tcp", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 3, nullptr, nullptr, nullptr) == abi::kSuccess && ctx != nullptr);
        BRAID_CHILD_CHECK(net->finalize(ctx) == abi::kSuccess);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// BRAID_TCP_CONGESTION and BRAID_CC_*: a name the kernel lacks and a policy that does not exist fail init with
// ncclInvalidUsage naming the variable; reno (built into every kernel) with the adaptive policy initialises and
// says so.
TEST(NetPlugin, CongestionVariablesAreChecked) {
  ForkResult r = runForked(
      1,
      [&](int) {
        const abi::NetV11* net = childTableV11("lo");
        BRAID_CHILD_CHECK(net != nullptr);
        setenv("BRAID_NET_TRANSPORT", "tcp", 1);
        void* ctx = nullptr;
        setenv("BRAID_TCP_CONGESTION", "no_such_cc", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 1, nullptr, &captureLog, nullptr) == abi::kInvalidUsage && ctx == nullptr);
        BRAID_CHILD_CHECK(g_logged.find("BRAID_TCP_CONGESTION='no_such_cc'") != std::string::npos);
        setenv("BRAID_TCP_CONGESTION", "reno", 1);
        setenv("BRAID_CC_POLICY", "sometimes", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 2, nullptr, &captureLog, nullptr) == abi::kInvalidUsage && ctx == nullptr);
        BRAID_CHILD_CHECK(g_logged.find("BRAID_CC_POLICY=sometimes") != std::string::npos);
        g_logged.clear();
        setenv("BRAID_CC_POLICY", "adaptive", 1);
        BRAID_CHILD_CHECK(net->init(&ctx, 3, nullptr, &captureLog, nullptr) == abi::kSuccess && ctx != nullptr);
        BRAID_CHILD_CHECK(g_logged.find("congestion control adaptive") != std::string::npos);
        BRAID_CHILD_CHECK(net->finalize(ctx) == abi::kSuccess);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

// Ranks that disagree on BRAID_NET_TRANSPORT: connect to a listener of the other data path is ncclInvalidUsage
// naming the variable, not a hang or garbage on the wire.
TEST(NetPlugin, MismatchedTransportsAreAUsageError) {
  if (dataPaths().size() < 2) GTEST_SKIP() << "built without UCX";
  ForkResult r = runForked(
      1,
      [&](int) {
        setenv("UCX_TLS", "tcp,self", 0);
        const abi::NetV11* net = childTableV11("lo");
        BRAID_CHILD_CHECK(net != nullptr);
        void *tcp = nullptr, *ucx = nullptr;
        setenv("BRAID_NET_TRANSPORT", "tcp", 1);
        BRAID_CHILD_CHECK(net->init(&tcp, 1, nullptr, &captureLog, nullptr) == abi::kSuccess);
        setenv("BRAID_NET_TRANSPORT", "ucx", 1);
        BRAID_CHILD_CHECK(net->init(&ucx, 2, nullptr, &captureLog, nullptr) == abi::kSuccess);
        for (auto [listener, connector] : {std::pair{tcp, ucx}, std::pair{ucx, tcp}}) {
          char handle[abi::kNetHandleMaxSize] = {};
          void* listen = nullptr;
          BRAID_CHILD_CHECK(net->listen(listener, 0, handle, &listen) == abi::kSuccess);
          void* send = nullptr;
          abi::NetDeviceHandle* dev = nullptr;
          g_logged.clear();
          BRAID_CHILD_CHECK(net->connect(connector, 0, handle, &send, &dev) == abi::kInvalidUsage && send == nullptr);
          BRAID_CHILD_CHECK(g_logged.find("BRAID_NET_TRANSPORT") != std::string::npos);
          BRAID_CHILD_CHECK(net->closeListen(listen) == abi::kSuccess);
        }
        BRAID_CHILD_CHECK(net->finalize(tcp) == abi::kSuccess && net->finalize(ucx) == abi::kSuccess);
        return 0;
      },
      kForkTimeoutS);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

}  // namespace
}  // namespace braid::testing

// LeakSanitizer's hook (sanitizer/lsan_interface.h), asked at exit: non-zero skips the leak check. Set by a child that
// exits with its comms open on purpose: what they hold is never released then, by design.
namespace {
bool g_exit_with_comms_open = false;
}  // namespace
extern "C" int __lsan_is_turned_off() { return g_exit_with_comms_open ? 1 : 0; }

namespace braid::testing {
namespace {

// A process that exits (std::exit: static destructors, then the libraries' own) with its comms open and a receive
// still pending, as an application that never destroys its NCCL communicators does: it exits with its own status,
// the data path's threads do not crash it on the way out.
TEST_P(NetPluginPath, ExitWithCommsOpenIsClean) {
  ForkResult r = runPair([&](int rank, HandlePipes& pipes) {
    NetApi net = childApi(11, GetParam());
    NET_OK(net.init(23));
    std::vector<uint8_t> buf(1 << 20);
    PairEnd end;
    NET_OK(connectPair(net, rank, pipes, end));
    if (rank == 0) {
      for (int k = 0; k < 2; ++k) {  // the first completes, the second stays pending
        void* req = nullptr;
        NET_OK(irecvOne(net, end.recv, buf.data(), buf.size(), k, nullptr, &req));
        int got = 0;
        if (k == 0) NET_OK(net.wait(req, &got));
      }
      BRAID_CHILD_CHECK(pipes.send(0, end.handle));  // both receives are posted: the sender may exit
    } else {
      NET_OK(sendAndWait(net, end.send, buf.data(), buf.size(), 0, nullptr));
      BRAID_CHILD_CHECK(pipes.receive(0, end.handle));
    }
    std::fflush(stderr);
    g_exit_with_comms_open = true;
    std::exit(42);
  });
  ASSERT_EQ(r.ranks.size(), 2u) << r.summary();
  for (const RankOutcome& rank : r.ranks) EXPECT_TRUE(rank.exited && rank.exit_code == 42) << r.summary();
}

}  // namespace
}  // namespace braid::testing
