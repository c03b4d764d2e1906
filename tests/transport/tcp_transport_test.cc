// What only the TCP transport (runtime/transport/tcp/) has: close frames, so that a message sent before a peer
// destroyed its endpoint is still received and only what waits for that peer fails. The DataTransport contract itself
// (unexpected-message buffering included: 64 MiB both ways before either receive is posted) is conformance_test.cc's.
#include "transport/tcp/tcp_transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::ForkResult;

BufferRef ref(BufferKind kind, uint64_t offset, uint64_t bytes) { return BufferRef{kind, offset, bytes}; }

// Rank 1 sends one message and destroys its endpoint (a close frame, then EOF): rank 0 still receives that
// message; its next receive from rank 1 fails naming the close.
TEST(TcpTransport, ReceiveFromAClosedPeerFails) {
  testing::ForkShared<UniqueId> id;
  const ForkResult result = testing::runForked(
      2,
      [&](int rank) {
        auto bootstrap = testing::childBootstrap(id, rank, 2, /*timeout_s=*/20);
        BRAID_CHILD_CHECK_OK(bootstrap);
        TransportOptions options;
        options.timeout_s = 20;
        auto created = createTcpTransport(**bootstrap, options);
        BRAID_CHILD_CHECK_OK(created);
        std::unique_ptr<DataTransport> t = std::move(*created);
        std::vector<uint8_t> buffer(64);
        BRAID_CHILD_CHECK_OK(t->bind(rank, RankMemory{buffer.data(), 64, buffer.data(), 64, nullptr, 0}, {}));
        if (rank == 1) {
          BRAID_CHILD_CHECK_OK(t->postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 8)}));
          std::vector<Completion> done;
          BRAID_CHILD_CHECK_OK(t->poll(&done, true));
          t.reset();  // a normal close
          usleep(300 * 1000);
          return 0;
        }
        std::vector<RequestId> seen;
        auto first = t->postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        BRAID_CHILD_CHECK_OK(first);
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(*t, *first, &seen));
        usleep(100 * 1000);
        auto second = t->postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        Status status = second.status();
        std::vector<Completion> done;
        if (status.isOk()) status = t->poll(&done, true);
        const bool named_close = status.code() == StatusCode::kRemoteError &&
                                 status.message().find("closed its endpoint") != std::string::npos;
        return named_close
                   ? 0
                   : testing::report(rank, "receive after the close", status.isOk() ? internalError("ok") : status);
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

}  // namespace
}  // namespace braid
