// The threads transport: ranks that are threads of one process exchange data by memcpy between their buffers
// (zero-copy between ranks when the receive is already posted, like NVLink P2P), through a shared "world".
//
// Per connection (sender, receiver, channel) a FIFO under a mutex holds the sends not yet matched and the
// receives not yet matched (transport.h: FIFO matching per connection). A send that finds a posted receive
// copies its bytes straight into the receiver's dst and completes both; otherwise, while fewer than
// TransportOptions::fifo_depth messages are staged on the connection, the sender copies into a pooled staging
// buffer and the send completes at once (NCCL_STEPS-style eager buffering); beyond that the send stays
// pending and the receiver, when it posts the matching receive, copies from the sender's src and completes
// both. When the receiver takes a staged message it also stages the first pending send (its slot freed), so
// send number s of a connection completes as soon as s < receives posted + fifo_depth (MemTransport's rule).
// Every copy that touches another rank's memory is done under the connection's mutex, so once an endpoint
// withdrew its requests (abort, failure, destruction) no peer reads or writes its buffers any more.
//
// Completions: requests finished by the endpoint's own thread (local requests, which run at post time, and
// its own matches) wait in a private list; requests finished by a peer's thread go to the endpoint's inbox
// (mutex + condition variable) and wake it. poll(block = true) first watches the inbox's arrival count for up
// to BRAID_SPIN_US µs (TransportOptions::spin_us; not when the ranks outnumber the cores, and backing off after
// spins that found nothing: SpinGovernor, endpoint_common.h), then sleeps on the condition variable for at most
// the timeout and returns kTimeout naming what the rank waits for.
//
// Failures: abort() marks the world failed; every endpoint's blocked or later call returns kRemoteError
// "rank 1 failed: <why>" at once (everyone is woken), the aborting endpoint returns `why`. A send and receive
// of different sizes is kInvalidArgument naming both ranks, for the rank that matched them, and fails the
// world. Endpoints may be destroyed in any order (the world is shared); destroying one with requests still
// outstanding fails the world.
#pragma once

#include <memory>
#include <vector>

#include "braid/transport.h"
#include "transport/factory.h"

namespace braid {

/// A world of `num_ranks` ranks in this process without a bootstrap: endpoint r drives rank r and is used by
/// one thread at a time (its own). Options: timeout_s (0 = BRAID_TIMEOUT), fifo_depth (messages staged per
/// connection; negative counts as 0: no staging, a send completes only when its receive is posted). Returns
/// num_ranks endpoints (none when num_ranks < 1).
std::vector<std::unique_ptr<DataTransport>> createThreadsWorld(int num_ranks, const TransportOptions& options = {});

}  // namespace braid
