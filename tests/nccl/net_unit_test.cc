// Pieces of the net plugin on their own: interface selection (NCCL_SOCKET_IFNAME syntax), the connect handle,
// payload striping, the ABI layout and NCCL's library search rules as the harness applies them.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "abi/net_abi.h"
#include "nccl/net_harness.h"
#include "net/comm.h"
#include "net/devices.h"
#include "net/handle.h"

namespace braid::nccl_plugin {
namespace {

std::vector<InterfaceCandidate> hostLike() {
  return {{"lo", 0x0100007f, true, true},
          {"eth0", 0x0200000a, true, false},
          {"eth1", 0x0300000a, false, false},  // down
          {"docker0", 0x010011ac, true, false},
          {"ib0", 0x0400000a, true, false}};
}

std::vector<std::string> names(const Result<std::vector<InterfaceCandidate>>& r) {
  std::vector<std::string> out;
  if (r.isOk())
    for (const auto& c : r.value()) out.push_back(c.name);
  return out;
}

// Dead-peer detection on a comm's sockets: keepalive after 10 s idle, probes 5 s apart, and TCP_USER_TIMEOUT at
// BRAID_TIMEOUT in milliseconds, at least 1 s and at most what the option holds (INT_MAX ms).
TEST(NetDeadPeer, KeepAliveAndUserTimeoutFollowTheTimeout) {
  const auto option = [](int fd, int level, int name) {
    unsigned int value = 0;
    socklen_t size = sizeof(value);
    EXPECT_EQ(getsockopt(fd, level, name, &value, &size), 0) << name;
    return value;
  };
  const struct {
    double seconds;
    unsigned int expected_ms;
  } cases[] = {{300, 300000}, {2.5, 2500}, {0.2, 1000}, {1e8, INT_MAX}, {std::nan(""), 1000}};
  for (const auto& c : cases) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    setDeadPeerDetection(fd, c.seconds);
    EXPECT_EQ(option(fd, SOL_SOCKET, SO_KEEPALIVE), 1u) << c.seconds;
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 10u) << c.seconds;
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5u) << c.seconds;
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), c.expected_ms) << c.seconds;
    close(fd);
  }
}

TEST(NetInterfaces, FilterSyntax) {
  InterfaceFilter f = parseInterfaceFilter("eth,ib");
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  EXPECT_TRUE(f.keeps("eth0"));
  EXPECT_TRUE(f.keeps("ib3"));
  EXPECT_FALSE(f.keeps("lo"));
  f = parseInterfaceFilter("^docker,lo");
  EXPECT_TRUE(f.exclude);
  EXPECT_FALSE(f.keeps("docker0"));
  EXPECT_TRUE(f.keeps("eth0"));
  f = parseInterfaceFilter("=eth0");
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(f.keeps("eth0"));
  EXPECT_FALSE(f.keeps("eth01"));
  f = parseInterfaceFilter("^=eth0, ,");
  EXPECT_TRUE(f.exclude && f.exact);
  EXPECT_EQ(f.names.size(), 1u);
  EXPECT_TRUE(f.keeps("eth01"));
  EXPECT_FALSE(f.keeps("eth0"));
}

TEST(NetInterfaces, DefaultSkipsLoopbackDockerAndDown) {
  EXPECT_EQ(names(selectInterfaces(hostLike(), "", "BRAID_NET_IF")), (std::vector<std::string>{"eth0", "ib0"}));
}

TEST(NetInterfaces, LoopbackWhenNothingElseOrAsked) {
  std::vector<InterfaceCandidate> only_lo = {{"lo", 0x0100007f, true, true}, {"docker0", 1, true, false}};
  EXPECT_EQ(names(selectInterfaces(only_lo, "", "BRAID_NET_IF")), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(names(selectInterfaces(hostLike(), "lo", "BRAID_NET_IF")), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(names(selectInterfaces(hostLike(), "^eth,ib", "X")), (std::vector<std::string>{"lo", "docker0"}));
}

TEST(NetInterfaces, NoMatchIsAClearError) {
  auto r = selectInterfaces(hostLike(), "=eth", "NCCL_SOCKET_IFNAME");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidUsage);
  EXPECT_NE(r.status().message().find("NCCL_SOCKET_IFNAME==eth"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("eth0"), std::string::npos);  // lists what exists
  EXPECT_FALSE(selectInterfaces({}, "", "BRAID_NET_IF").isOk());
}

TEST(NetHandle, RoundTripAndRejects) {
  char buf[nccl_abi::kNetHandleMaxSize];
  std::memset(buf, 0x5a, sizeof(buf));
  ConnectHandle h;
  h.ip = 0x0100007f;
  h.port = 40123;
  h.nsocks = 4;
  h.nthreads = 2;
  h.nonce = 0x1234567890abcdefull;
  encodeHandle(h, buf);
  for (size_t i = kConnectStateOffset; i < sizeof(buf); ++i) ASSERT_EQ(buf[i], 0) << i;  // state slot starts empty
  auto back = decodeHandle(buf);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->ip, h.ip);
  EXPECT_EQ(back->port, h.port);
  EXPECT_EQ(back->nsocks, 4);
  EXPECT_EQ(back->nthreads, 2);
  EXPECT_EQ(back->nonce, h.nonce);
  char bad[nccl_abi::kNetHandleMaxSize] = {};
  EXPECT_EQ(decodeHandle(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(decodeHandle(nullptr).isOk());
  EXPECT_EQ(back->transport, NetTransport::kTcp);
  h.nthreads = 5;  // more threads than sockets
  encodeHandle(h, buf);
  EXPECT_FALSE(decodeHandle(buf).isOk());
}

// A UCX listener's handle carries no data sockets; the counts must fit the transport it names.
TEST(NetHandle, TransportRoundTripAndCountsPerTransport) {
  char buf[nccl_abi::kNetHandleMaxSize];
  ConnectHandle h;
  h.ip = 0x0100007f;
  h.port = 40124;
  h.nsocks = 0;
  h.nthreads = 0;
  h.nonce = 77;
  h.transport = NetTransport::kUcx;
  encodeHandle(h, buf);
  auto back = decodeHandle(buf);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->transport, NetTransport::kUcx);
  EXPECT_EQ(back->nsocks, 0);
  h.nsocks = h.nthreads = 2;  // data sockets on a UCX handle: corrupt
  encodeHandle(h, buf);
  EXPECT_EQ(decodeHandle(buf).status().code(), StatusCode::kInvalidArgument);
  h.transport = NetTransport::kTcp;
  h.nsocks = h.nthreads = 0;  // no data socket on a TCP handle: corrupt
  encodeHandle(h, buf);
  EXPECT_EQ(decodeHandle(buf).status().code(), StatusCode::kInvalidArgument);
  h.nsocks = h.nthreads = 1;
  h.transport = static_cast<NetTransport>(7);
  encodeHandle(h, buf);
  EXPECT_EQ(decodeHandle(buf).status().code(), StatusCode::kInvalidArgument);
}

TEST(NetHandle, TransportNames) {
  EXPECT_EQ(parseNetTransport("tcp").value(), NetTransport::kTcp);
  EXPECT_EQ(parseNetTransport("UCX").value(), NetTransport::kUcx);
  auto bad = parseNetTransport("ib");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidUsage);
  EXPECT_NE(bad.status().message().find("BRAID_NET_TRANSPORT=ib"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(parseNetTransport("").isOk());
  EXPECT_STREQ(transportName(NetTransport::kUcx), "ucx");
}

TEST(NetStriping, ChunkSizes) {
  EXPECT_EQ(chunkBytes(1, 4), kMinChunkBytes);
  EXPECT_EQ(chunkBytes(4 << 20, 2), size_t{2} << 20);
  EXPECT_EQ(chunkBytes((4 << 20) + 1, 4), size_t{(1 << 20) + 1});
  EXPECT_EQ(chunkBytes(100 << 10, 1), size_t{100} << 10);
}

TEST(NetAbi, ConstantsAndLayout) {
  EXPECT_EQ(nccl_abi::kNetHandleMaxSize, 128u);
  EXPECT_EQ(nccl_abi::kNetMaxRequests, 32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(nccl_abi::kOptionalRecvCompletion), 1u);
  EXPECT_EQ(offsetof(nccl_abi::NetV11, finalize), 20 * sizeof(void*));
  EXPECT_EQ(offsetof(nccl_abi::NetV11, setNetAttr), 21 * sizeof(void*));
  EXPECT_EQ(offsetof(nccl_abi::NetV6, closeListen), 16 * sizeof(void*));
  EXPECT_EQ(offsetof(nccl_abi::NetPropertiesV8, regIsGlobal), 28u);
}

TEST(NetLoad, SearchRuleCandidates) {
  using braid::testing::netPluginCandidates;
  EXPECT_EQ(netPluginCandidates("braid"), (std::vector<std::string>{"braid", "libnccl-net-braid.so"}));
  EXPECT_EQ(netPluginCandidates("/opt/x/libnccl-net-braid.so"),
            (std::vector<std::string>{"/opt/x/libnccl-net-braid.so"}));
  EXPECT_EQ(netPluginCandidates("libfoo.so,braid"),
            (std::vector<std::string>{"libfoo.so", "braid", "libnccl-net-braid.so"}));
}

}  // namespace
}  // namespace braid::nccl_plugin
