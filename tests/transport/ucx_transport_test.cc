// What only the UCX transport (runtime/transport/ucx/) has: the tag layout, fifo_depth bounding the ucp sends in
// flight per connection (sends beyond it wait uncopied), the 16-bit channel limit of the tag, UCX_TLS handling,
// and the stub of a build without UCX, which must say so. The DataTransport contract itself is
// conformance_test.cc's.
#include "transport/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::ForkResult;

const testing::TransportUnderTest kUcx{"ucx", &createUcxTransport, false, 0, nullptr};

// UCX's transports for the tests: TCP over loopback works in every container (shared-memory transports need
// /dev/shm and, for large messages, cross-memory attach). An explicit UCX_TLS from the environment wins.
class UcxTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef BRAID_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    setenv("UCX_TLS", "tcp,self", /*overwrite=*/0);
  }
};

#ifndef BRAID_HAVE_UCX
// A bootstrap of one rank that is never asked anything (the stub returns before using it).
class UnusedBootstrap : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<std::string>& hostNames() const override { return hosts_; }
  const std::vector<int64_t>& processIds() const override { return pids_; }
  Status allGather(void*, size_t) override { return internalError("unused"); }
  Status barrier() override { return internalError("unused"); }
  Status send(int, int, const void*, size_t) override { return internalError("unused"); }
  Status recv(int, int, void*, size_t) override { return internalError("unused"); }
  Status checkPeers() override { return Status::ok(); }
  void abort(const std::string&) override {}

 private:
  std::vector<std::string> hosts_{"localhost"};
  std::vector<int64_t> pids_{1};
};

TEST(UcxTransportStub, ReportsBuiltWithoutUcx) {
  UnusedBootstrap bootstrap;
  Result<std::unique_ptr<DataTransport>> created = createUcxTransport(bootstrap, TransportOptions{});
  EXPECT_EQ(created.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(created.status().message(), "built without UCX");
}
#endif

TEST(UcxTag, FieldsDoNotOverlap) {
  // Hand-computed: rank 5 << 44, channel 3 << 28, sequence 9; the sequence wraps at 2^28.
  EXPECT_EQ(ucx::messageTag(5, 3, 9), (uint64_t{5} << 44) | (uint64_t{3} << 28) | 9u);
  EXPECT_EQ(ucx::messageTag(1, 0, (uint64_t{1} << 28) + 4), (uint64_t{1} << 44) | 4u);
  EXPECT_EQ(ucx::messageTag((1 << 20) - 1, (1 << 16) - 1, (uint64_t{1} << 28) - 1), ~uint64_t{0});
}

// Sends complete before their receives are posted, also large ones (rendezvous inside UCX) and more of them
// than fifo_depth (the ones beyond wait, uncopied, for room and complete once earlier ones finished); then
// everything arrives intact and in order per channel, zero-byte messages included; channels beyond the tag's
// 16 bits are kUnsupported.
TEST_F(UcxTransportTest, BufferedSendsAndOrder) {
  TransportOptions options;
  options.timeout_s = 20;
  options.fifo_depth = 2;  // the first two messages fit and complete before rank 1 posts anything
  const std::vector<testing::ExchangeMessage> messages = {{4, 0, 1 << 20},
                                                          {4, 1 << 20, 1 << 20},
                                                          {4, 2 << 20, 0},
                                                          {9, 2 << 20, 100},
                                                          {4, (2 << 20) + 100, 7},
                                                          {9, (2 << 20) + 107, 500000},
                                                          {65535, (2 << 20) + 500107, 1}};
  const ForkResult result = testing::forkSendAheadExchange(
      kUcx, options, messages, /*early=*/2, [](int rank, Bootstrap&, DataTransport& t) -> int {
        if (rank == 0) return 0;
        const Status wide = t.postRecv(RecvRequest{1, 0, 1 << 16, BufferRef{BufferKind::kOutput, 0, 0}, {}}).status();
        if (wide.code() != StatusCode::kUnsupported || wide.message().find("65536") == std::string::npos) {
          return testing::report(rank, "channel 65536", wide.isOk() ? internalError("accepted") : wide);
        }
        return 0;
      });
  EXPECT_TRUE(result.allOk()) << result.summary();
}

}  // namespace
}  // namespace braid
