// The shared-memory transport; the design (segments, rings, doorbells) is described in shm_transport.h.
#include "transport/shm/shm_transport.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/nonce.h"
#include "transport/endpoint_base.h"

namespace braid {
namespace shm {

namespace {

constexpr uint64_t kMagic = 0x314853444941524Bull;  // arbitrary tag of a Braid shm segment, version 1
constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxAddressSpace = uint64_t{1} << 46;  // all segments one process maps, bytes

uint64_t roundUp(uint64_t value, uint64_t align) { return (value + align - 1) / align * align; }

// Page 0 of a segment. Fields written once at creation are plain; the shared mutable words are accessed
// through std::atomic_ref only.
struct SegmentHeader {
  uint64_t magic;
  uint64_t num_ranks;
  uint64_t fifo_depth;
  uint64_t slot_bytes;
  uint64_t owner;
  uint64_t total_bytes;
  alignas(64) uint32_t doorbell;  // bumped by peers that changed one of the owner's rings
  uint32_t waiters;               // > 0 while the owner may sleep on the doorbell
  alignas(64) uint32_t failed;    // 1 once the owner aborted
};
static_assert(sizeof(SegmentHeader) <= kPage);

struct RingCounters {
  alignas(64) uint64_t head;  // slots ever filled (sender)
  alignas(64) uint64_t tail;  // slots ever consumed (receiver)
};
static_assert(sizeof(RingCounters) == 128);

struct SlotDescriptor {
  uint64_t message_bytes;   // size of the whole message this fragment belongs to
  uint64_t fragment_bytes;  // bytes of it in this slot
};

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);

template <typename T>
std::atomic_ref<T> shared(T& word) {
  return std::atomic_ref<T>(word);
}

long futexWait(uint32_t* word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  return syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

Status systemError(const std::string& what) {
  return Status(StatusCode::kSystemError, fmt::format("{}: {}", what, std::strerror(errno)));
}

class ShmTransport final : public EndpointBase {
 public:
  ShmTransport(Bootstrap& bootstrap, const TransportOptions& options, const SegmentLayout& layout)
      : EndpointBase(Config{"shm", bootstrap.rank(), bootstrap.size(), endpointTimeoutSeconds(options), INT_MAX,
                            /*progress_thread=*/true, &bootstrap}),
        bootstrap_(bootstrap),
        layout_(layout),
        spin_(endpointSpinMicroseconds(options, bootstrap.size())),
        segments_(static_cast<size_t>(bootstrap.size())),
        notify_(static_cast<size_t>(bootstrap.size()), 0) {}

  ~ShmTransport() override {
    progressThread().stop();
    for (Segment& segment : segments_) {
      if (segment.base != nullptr) munmap(segment.base, layout_.total_bytes);
      if (segment.fd >= 0) close(segment.fd);
      if (segment.linked) shm_unlink(segment.name.c_str());
    }
  }

  // Collective: creates this rank's segment, maps every peer's, unlinks its own once all mapped.
  Status setup() {
    std::vector<uint64_t> nonces(static_cast<size_t>(size_), 0);
    nonces[static_cast<size_t>(rank_)] = randomNonce();
    BRAID_RETURN_IF_ERROR(bootstrap_.allGather(nonces.data(), sizeof(uint64_t)));
    for (int p = 0; p < size_; ++p)
      segments_[static_cast<size_t>(p)].name = segmentName(bootstrap_.processIds()[0], nonces[0], p);

    const Status created = createOwn();
    BRAID_RETURN_IF_ERROR(agreeOnSetup(bootstrap_, created, "shm", "create its shared-memory segment"));
    Status mapped = Status::ok();
    for (int p = 0; p < size_ && mapped.isOk(); ++p) {
      if (p != rank_) mapped = mapPeer(p);
    }
    const Status all_mapped = agreeOnSetup(bootstrap_, mapped, "shm", "map the other ranks' shared-memory segments");
    Segment& own = segments_[static_cast<size_t>(rank_)];
    if (own.linked) {  // every rank tried to map it: the name is no longer needed
      shm_unlink(own.name.c_str());
      own.linked = false;
    }
    return all_mapped;
  }

  // A message larger than the whole ring is copied privately so the send completes before its receive is posted.
  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override {
    BRAID_ASSIGN_OR_RETURN(Conn * conn, connection(/*outgoing=*/true, request.peer, request.channel));
    Op op;
    op.id = id;
    op.ptr = const_cast<uint8_t*>(src);
    op.bytes = request.src.bytes;
    if (op.bytes > static_cast<uint64_t>(layout_.fifo_depth) * layout_.slot_bytes) {
      op.owned.assign(src, src + op.bytes);
      op.ptr = op.owned.data();
      op.reported = true;
      complete(id);
      ++private_streams_;
      ProgressThread& progress = progressThread();
      if (!progress.running()) progress.start([this] { progressLoop(); });
      progress.wake();
    }
    conn->ops.push_back(std::move(op));
    return progressAndNotify(*conn);
  }

  Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) override {
    BRAID_ASSIGN_OR_RETURN(Conn * conn, connection(/*outgoing=*/false, request.peer, request.channel));
    Op op;
    op.id = id;
    op.ptr = dst;
    op.bytes = request.dst.bytes;
    conn->ops.push_back(std::move(op));
    return progressAndNotify(*conn);
  }

  Status progress() override { return progressAll(); }

  Status waitForCompletion() override {
    if (pendingOps() == 0) {
      return internalError(fmt::format("shm: rank {}: blocking poll with no request outstanding", rank_));
    }
    SegmentHeader& own = header(rank_);
    // Spinning (SpinGovernor): progress whenever the doorbell moved, without announcing a waiter, so peers skip
    // the futex wake-up.
    uint32_t seen = shared(own.doorbell).load(std::memory_order_acquire);
    Status spun = Status::ok();
    bool first = true;
    const bool stopped = spin_.spin([&] {
      const uint32_t now = shared(own.doorbell).load(std::memory_order_acquire);
      if (!first && now == seen) return false;
      first = false;
      seen = now;
      spun = progressAll();
      return !spun.isOk() || hasCompletions();
    });
    if (stopped) return spun;
    BlockingWait wait = beginWait(kWaitSliceMs);
    while (true) {
      const uint32_t seen = shared(own.doorbell).load(std::memory_order_seq_cst);
      shared(own.waiters).fetch_add(1, std::memory_order_seq_cst);
      Status status = progressAll();
      wait.tick();
      // bootstrap.checkPeers() costs a system call: at most once per wait slice.
      if (status.isOk() && !hasCompletions()) status = peerFailures(wait.peerCheckDue());
      if (status.isOk() && !hasCompletions() && wait.expired()) status = timeoutStatus(wait.waitedSeconds());
      if (!status.isOk() || hasCompletions()) {
        shared(own.waiters).fetch_sub(1, std::memory_order_seq_cst);
        return status;
      }
      futexWait(&own.doorbell, seen, wait.sleepMs());
      shared(own.waiters).fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // The bootstrap's abort frame (with the reason) goes out first, so a peer woken by the flag finds it.
  void tellPeersOfAbort(const Status& reason) override {
    bootstrap_.abort(reason.toString());
    if (segments_[static_cast<size_t>(rank_)].base != nullptr) {
      shared(header(rank_).failed).store(1, std::memory_order_seq_cst);
    }
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && segments_[static_cast<size_t>(p)].base != nullptr) ring(p);
    }
  }

 private:
  // Background progress, started with the first privately buffered send: such a send completed to the
  // executor but its bytes still stream through the ring as the receiver frees slots, also after execute()
  // returned and nobody calls poll(). While such sends remain and the owner has been out of the transport for
  // ProgressThread::kOwnerIdle, this thread moves them on, sleeping on this rank's doorbell in between.
  void progressLoop() {
    ProgressThread& progress = progressThread();
    std::unique_lock<std::mutex> lock(progress.mutex());
    SegmentHeader& own = header(rank_);
    while (progress.waitForWork(lock, [this] { return private_streams_ > 0 && !failed(); })) {
      const uint32_t seen = shared(own.doorbell).load(std::memory_order_seq_cst);
      shared(own.waiters).fetch_add(1, std::memory_order_seq_cst);
      (void)fail(progressAll());  // an error surfaces at the owner's next call
      if (private_streams_ > 0) {
        lock.unlock();
        futexWait(&own.doorbell, seen, 10);
        lock.lock();
      }
      shared(own.waiters).fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  struct Segment {
    std::string name;
    int fd = -1;
    uint8_t* base = nullptr;
    bool linked = false;  // this process created it and has not unlinked it yet
  };
  struct Op {
    RequestId id = 0;
    uint8_t* ptr = nullptr;
    uint64_t bytes = 0;
    uint64_t done = 0;       // bytes moved through the ring
    uint64_t fragments = 0;  // slots used
    bool reported = false;   // completion already queued (send of a privately buffered message)
    std::vector<uint8_t> owned;
  };
  struct Conn {
    bool outgoing = false;
    int peer = 0;
    int channel = 0;
    RingCounters* counters = nullptr;
    SlotDescriptor* descriptors = nullptr;
    uint8_t* data = nullptr;
    uint64_t position = 0;  // this side's counter: head (outgoing) or tail (incoming)
    std::deque<Op> ops;
  };

  SegmentHeader& header(int rank) {
    return *reinterpret_cast<SegmentHeader*>(segments_[static_cast<size_t>(rank)].base);
  }

  Status createOwn() {
    Segment& own = segments_[static_cast<size_t>(rank_)];
    own.fd = shm_open(own.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (own.fd < 0) return systemError(fmt::format("shm: rank {}: shm_open({}) to create", rank_, own.name));
    own.linked = true;
    if (ftruncate(own.fd, static_cast<off_t>(layout_.total_bytes)) != 0) {
      return systemError(fmt::format("shm: rank {}: ftruncate({}, {} bytes)", rank_, own.name, layout_.total_bytes));
    }
    BRAID_RETURN_IF_ERROR(mapSegment(rank_));
    // Page 0 and the directory are touched by every rank: allocate them now (no SIGBUS on a full /dev/shm).
    if (fallocate(own.fd, 0, 0, static_cast<off_t>(layout_.rings_offset)) != 0) {
      return systemError(
          fmt::format("shm: rank {}: fallocate of the {} header bytes of {}", rank_, layout_.rings_offset, own.name));
    }
    SegmentHeader& h = header(rank_);
    h.num_ranks = static_cast<uint64_t>(size_);
    h.fifo_depth = static_cast<uint64_t>(layout_.fifo_depth);
    h.slot_bytes = layout_.slot_bytes;
    h.owner = static_cast<uint64_t>(rank_);
    h.total_bytes = layout_.total_bytes;
    shared(h.magic).store(kMagic, std::memory_order_release);
    return Status::ok();
  }

  Status mapSegment(int p) {
    Segment& segment = segments_[static_cast<size_t>(p)];
    void* base = mmap(nullptr, layout_.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, segment.fd, 0);
    if (base == MAP_FAILED) {
      return systemError(fmt::format("shm: rank {}: mmap of rank {}'s segment {} ({} bytes)", rank_, p, segment.name,
                                     layout_.total_bytes));
    }
    segment.base = static_cast<uint8_t*>(base);
    return Status::ok();
  }

  Status mapPeer(int p) {
    Segment& segment = segments_[static_cast<size_t>(p)];
    segment.fd = shm_open(segment.name.c_str(), O_RDWR, 0600);
    if (segment.fd < 0)
      return systemError(fmt::format("shm: rank {}: shm_open({}) of rank {}", rank_, segment.name, p));
    struct stat info {};
    if (fstat(segment.fd, &info) != 0) return systemError(fmt::format("shm: rank {}: fstat({})", rank_, segment.name));
    if (static_cast<uint64_t>(info.st_size) != layout_.total_bytes) {
      return invalidArgument(fmt::format(
          "shm: rank {}: rank {}'s segment {} has {} bytes, expected {} (ranks disagree on fifo_depth or slot_bytes?)",
          rank_, p, segment.name, info.st_size, layout_.total_bytes));
    }
    BRAID_RETURN_IF_ERROR(mapSegment(p));
    SegmentHeader& h = header(p);
    if (shared(h.magic).load(std::memory_order_acquire) != kMagic || h.num_ranks != static_cast<uint64_t>(size_) ||
        h.fifo_depth != static_cast<uint64_t>(layout_.fifo_depth) || h.slot_bytes != layout_.slot_bytes ||
        h.owner != static_cast<uint64_t>(p)) {
      return invalidArgument(fmt::format(
          "shm: rank {}: rank {}'s segment {} says {} ranks, fifo_depth {}, slot_bytes {}, owner {}; this rank "
          "uses {} ranks, fifo_depth {}, slot_bytes {}",
          rank_, p, segment.name, h.num_ranks, h.fifo_depth, h.slot_bytes, h.owner, size_, layout_.fifo_depth,
          layout_.slot_bytes));
    }
    return Status::ok();
  }

  // The connection's ring, claimed in the receiver's segment on first use (see shm_transport.h).
  Result<Conn*> connection(bool outgoing, int peer, int channel) {
    const uint64_t key =
        (outgoing ? uint64_t{1} << 63 : 0) | (static_cast<uint64_t>(peer) << 32) | static_cast<uint64_t>(channel);
    auto found = conns_.find(key);
    if (found != conns_.end()) return found->second.get();
    const int sender = outgoing ? rank_ : peer;
    const int receiver = outgoing ? peer : rank_;
    Segment& segment = segments_[static_cast<size_t>(receiver)];
    uint32_t* keys = reinterpret_cast<uint32_t*>(segment.base + layout_.directory_offset) +
                     static_cast<uint64_t>(sender) * kRingsPerPair;
    const uint32_t want = static_cast<uint32_t>(channel) + 1;
    int index = -1;
    for (int probe = 0; probe < kRingsPerPair && index < 0; ++probe) {
      const int i = static_cast<int>((static_cast<uint64_t>(channel) + static_cast<uint64_t>(probe)) % kRingsPerPair);
      uint32_t value = shared(keys[i]).load(std::memory_order_acquire);
      if (value == 0) shared(keys[i]).compare_exchange_strong(value, want, std::memory_order_acq_rel);
      // On success `value` is still 0 (the key is now ours); on failure it holds the key another side claimed.
      if (value == 0 || value == want) index = i;
    }
    if (index < 0) {
      return unsupported(
          fmt::format("shm: rank {} -> rank {}: more than {} channels between one pair of ranks "
                      "(channel {} has no ring left)",
                      sender, receiver, kRingsPerPair, channel));
    }
    const uint64_t offset = layout_.ringOffset(sender, index);
    if (fallocate(segment.fd, 0, static_cast<off_t>(offset), static_cast<off_t>(layout_.ring_bytes)) != 0) {
      return systemError(fmt::format("shm: rank {} -> rank {} channel {}: fallocate of its {}-byte ring in {}", sender,
                                     receiver, channel, layout_.ring_bytes, segment.name));
    }
    auto conn = std::make_unique<Conn>();
    conn->outgoing = outgoing;
    conn->peer = peer;
    conn->channel = channel;
    uint8_t* ring = segment.base + offset;
    conn->counters = reinterpret_cast<RingCounters*>(ring);
    conn->descriptors = reinterpret_cast<SlotDescriptor*>(ring + sizeof(RingCounters));
    conn->data = ring + layout_.ring_data_offset;
    conn->position = outgoing ? shared(conn->counters->head).load(std::memory_order_acquire)
                              : shared(conn->counters->tail).load(std::memory_order_acquire);
    Conn* raw = conn.get();
    conns_.emplace(key, std::move(conn));
    all_conns_.push_back(raw);
    return raw;
  }

  // Sender side: fragments of queued sends into free slots, in order.
  void progressSend(Conn& c) {
    const uint64_t depth = static_cast<uint64_t>(layout_.fifo_depth);
    while (!c.ops.empty()) {
      Op& op = c.ops.front();
      uint64_t tail = shared(c.counters->tail).load(std::memory_order_acquire);
      while (op.done < op.bytes || op.fragments == 0) {
        if (c.position - tail >= depth) {
          tail = shared(c.counters->tail).load(std::memory_order_acquire);
          if (c.position - tail >= depth) break;
        }
        const uint64_t slot = c.position % depth;
        const uint64_t fragment = std::min(layout_.slot_bytes, op.bytes - op.done);
        if (fragment > 0) std::memcpy(c.data + slot * layout_.slot_stride, op.ptr + op.done, fragment);
        c.descriptors[slot] = SlotDescriptor{op.bytes, fragment};
        ++c.position;
        shared(c.counters->head).store(c.position, std::memory_order_release);
        op.done += fragment;
        ++op.fragments;
        notify_[static_cast<size_t>(c.peer)] = 1;
      }
      if (op.done < op.bytes || op.fragments == 0) return;  // ring full
      if (op.reported) {
        --private_streams_;
      } else {
        complete(op.id);
      }
      c.ops.pop_front();
    }
  }

  // Receiver side: arrived slots into posted receives, in order.
  Status progressRecv(Conn& c) {
    while (!c.ops.empty()) {
      Op& op = c.ops.front();
      uint64_t head = shared(c.counters->head).load(std::memory_order_acquire);
      while (op.done < op.bytes || op.fragments == 0) {
        if (c.position == head) {
          head = shared(c.counters->head).load(std::memory_order_acquire);
          if (c.position == head) break;
        }
        const uint64_t slot = c.position % static_cast<uint64_t>(layout_.fifo_depth);
        const SlotDescriptor descriptor = c.descriptors[slot];
        if (descriptor.message_bytes != op.bytes) {
          return invalidArgument(
              fmt::format("shm: rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes",
                          c.peer, rank_, c.channel, descriptor.message_bytes, op.bytes));
        }
        if (descriptor.fragment_bytes > op.bytes - op.done || (descriptor.fragment_bytes == 0 && op.bytes > 0) ||
            descriptor.fragment_bytes > layout_.slot_bytes) {
          return internalError(
              fmt::format("shm: rank {} -> rank {} channel {}: corrupt slot {} ({} fragment bytes, {} of {} received)",
                          c.peer, rank_, c.channel, slot, descriptor.fragment_bytes, op.done, op.bytes));
        }
        if (descriptor.fragment_bytes > 0) {
          std::memcpy(op.ptr + op.done, c.data + slot * layout_.slot_stride, descriptor.fragment_bytes);
        }
        ++c.position;
        shared(c.counters->tail).store(c.position, std::memory_order_release);
        op.done += descriptor.fragment_bytes;
        ++op.fragments;
        notify_[static_cast<size_t>(c.peer)] = 1;
      }
      if (op.done < op.bytes || op.fragments == 0) return Status::ok();
      complete(op.id);
      c.ops.pop_front();
    }
    return Status::ok();
  }

  Status progress(Conn& c) {
    if (c.outgoing) {
      progressSend(c);
      return Status::ok();
    }
    return progressRecv(c);
  }

  Status progressAndNotify(Conn& c) {
    const Status status = progress(c);
    ringNotified();
    return fail(status);
  }

  Status progressAll() {
    Status status = Status::ok();
    for (Conn* c : all_conns_) {
      if (c->ops.empty()) continue;
      status = progress(*c);
      if (!status.isOk()) break;
    }
    ringNotified();
    return status;
  }

  void ringNotified() {
    for (int p = 0; p < size_; ++p) {
      if (notify_[static_cast<size_t>(p)] == 0) continue;
      notify_[static_cast<size_t>(p)] = 0;
      ring(p);
    }
  }

  // Wakes rank p if it sleeps (or is about to) on its doorbell.
  void ring(int p) {
    SegmentHeader& h = header(p);
    shared(h.doorbell).fetch_add(1, std::memory_order_seq_cst);
    if (shared(h.waiters).load(std::memory_order_seq_cst) > 0) futexWakeAll(&h.doorbell);
  }

  // An aborted peer (its failed flag) or one the bootstrap reports dead or aborted: kRemoteError naming it, with
  // the reason the bootstrap carried when it has one.
  Status peerFailures(bool check_bootstrap) {
    int aborted = -1;
    for (int p = 0; p < size_ && aborted < 0; ++p) {
      if (p != rank_ && shared(header(p).failed).load(std::memory_order_acquire) != 0) aborted = p;
    }
    if (aborted >= 0 || check_bootstrap) BRAID_RETURN_IF_ERROR(bootstrapFailure());
    if (aborted >= 0) {
      return Status(StatusCode::kRemoteError,
                    fmt::format("shm: rank {} failed (it aborted); rank {} stops waiting for it", aborted, rank_));
    }
    return Status::ok();
  }

  Status timeoutStatus(double waited_s) const {
    std::string what;
    for (const Conn* c : all_conns_) {
      if (c->ops.empty()) continue;
      const Op& op = c->ops.front();
      const uint64_t head = shared(c->counters->head).load(std::memory_order_acquire);
      const uint64_t tail = shared(c->counters->tail).load(std::memory_order_acquire);
      if (!c->outgoing) {
        what = fmt::format(
            "a message of {} bytes from rank {} on channel {} ({} receive(s) posted, {} of its bytes "
            "arrived)",
            op.bytes, c->peer, c->channel, c->ops.size(), op.done);
        break;
      }
      if (what.empty()) {
        what = fmt::format(
            "room to send {} more bytes to rank {} on channel {} (all {} slots hold unread data, {} "
            "send(s) queued)",
            op.bytes - op.done, c->peer, c->channel, head - tail, c->ops.size());
      }
    }
    return timeoutError(waited_s, what);
  }

  size_t pendingOps() const {
    size_t n = 0;
    for (const Conn* c : all_conns_) n += c->ops.size();
    return n;
  }

  Bootstrap& bootstrap_;
  const SegmentLayout layout_;
  SpinGovernor spin_;  // endpointSpinMicroseconds, adaptive
  // Everything below is guarded by progressThread().mutex(), held by every public call and the progress thread.
  int private_streams_ = 0;        // privately buffered sends still streaming
  std::vector<Segment> segments_;  // by rank; this rank's own segment at rank_
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> all_conns_;  // in creation order
  std::vector<char> notify_;      // peers whose doorbell to ring after this progress pass
};

}  // namespace

std::string segmentName(int64_t rank0_pid, uint64_t nonce, int rank) {
  return fmt::format("/braid-shm-{}-{:016x}-{}", rank0_pid, nonce, rank);
}

Result<SegmentLayout> SegmentLayout::make(int num_ranks, int fifo_depth, uint64_t slot_bytes) {
  if (num_ranks < 1 || fifo_depth < 1 || slot_bytes < 1 || slot_bytes > (uint64_t{1} << 40) || fifo_depth > 65536) {
    return invalidArgument(
        fmt::format("shm: {} ranks, fifo_depth {}, slot_bytes {}: need at least 1 rank, "
                    "1 <= fifo_depth <= 65536 and 1 <= slot_bytes <= 2^40",
                    num_ranks, fifo_depth, slot_bytes));
  }
  SegmentLayout layout;
  layout.num_ranks = num_ranks;
  layout.fifo_depth = fifo_depth;
  layout.slot_bytes = slot_bytes;
  layout.directory_offset = kPage;
  layout.rings_offset =
      roundUp(layout.directory_offset + static_cast<uint64_t>(num_ranks) * kRingsPerPair * sizeof(uint32_t), kPage);
  layout.ring_data_offset =
      roundUp(sizeof(RingCounters) + static_cast<uint64_t>(fifo_depth) * sizeof(SlotDescriptor), kPage);
  layout.slot_stride = roundUp(slot_bytes, 64);
  const unsigned __int128 ring =
      roundUp(layout.ring_data_offset + static_cast<uint64_t>(fifo_depth) * layout.slot_stride, kPage);
  const unsigned __int128 total =
      layout.rings_offset + static_cast<unsigned __int128>(num_ranks) * kRingsPerPair * ring;
  if (total * static_cast<unsigned>(num_ranks) > kMaxAddressSpace) {
    return invalidArgument(fmt::format(
        "shm: {} ranks with fifo_depth {} and slot_bytes {} need {} segments of {} bytes of address space each, more "
        "than 2^46 bytes in all: lower slot_bytes or fifo_depth",
        num_ranks, fifo_depth, slot_bytes, num_ranks, static_cast<uint64_t>(total)));
  }
  layout.ring_bytes = static_cast<uint64_t>(ring);
  layout.total_bytes = static_cast<uint64_t>(total);
  return layout;
}

}  // namespace shm

Result<std::unique_ptr<DataTransport>> createShmTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  const int rank = bootstrap.rank();
  for (int p = 0; p < bootstrap.size(); ++p) {
    if (bootstrap.hostNames()[p] != bootstrap.hostNames()[rank]) {
      return invalidArgument(
          fmt::format("shm: rank {} is on host '{}' and rank {} on host '{}': the shared-memory "
                      "transport needs every rank on one host",
                      p, bootstrap.hostNames()[p], rank, bootstrap.hostNames()[rank]));
    }
  }
  BRAID_ASSIGN_OR_RETURN(shm::SegmentLayout layout,
                         shm::SegmentLayout::make(bootstrap.size(), options.fifo_depth, options.slot_bytes));
  auto transport = std::make_unique<shm::ShmTransport>(bootstrap, options, layout);
  BRAID_RETURN_IF_ERROR(transport->setup());
  return std::unique_ptr<DataTransport>(std::move(transport));
}

}  // namespace braid
