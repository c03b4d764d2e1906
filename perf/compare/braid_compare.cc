// braid_compare: Braid vs Open MPI vs Gloo, side by side in one run (docs/performance.md).
//
// Launched under mpirun (perf/compare/run.sh): every process is one rank of all three libraries at once, so the
// three run on the same processes, the same CPU cores, the same buffers and the same sizes:
//   - Open MPI: MPI_Allreduce / MPI_Allgather / MPI_Reduce_scatter_block / MPI_Alltoall on a duplicate of
//     MPI_COMM_WORLD (the BTLs are mpirun's choice: run.sh passes --mca btl self,vader, shared memory);
//   - Gloo: gloo::allreduce / allgather / alltoall (the option-struct API PyTorch's ProcessGroupGloo calls) over
//     Gloo's TCP transport on 127.0.0.1, rendezvous through a gloo::rendezvous::FileStore in a temporary folder;
//   - Braid: braidCommInitRank over a unique id that rank 0 creates and MPI_Bcast sends (processes on one host:
//     Braid's "auto" transport, shared memory), then braidAllReduce / braidAllGather / braidReduceScatter /
//     braidAllToAll.
// Gloo has no reduce-scatter in this API (its ReduceScatterHalvingDoubling is an in-place algorithm object), so
// reduce_scatter compares Braid with Open MPI only.
//
// Sizes follow nccl-tests: `size` is the largest buffer of a rank in bytes (all-reduce: input = output = size;
// all-gather: output = size, input = size/n; reduce-scatter: input = size, output = size/n; all-to-all: input =
// output = size, size/n to each peer), float32 elements, sum. Sizes are rounded down to a multiple of 4n bytes.
// Bandwidths are nccl-tests' (doc/PERFORMANCE.md of NVIDIA/nccl-tests): algbw = size / time, busbw = algbw x
// 2(n-1)/n for all-reduce and (n-1)/n for all-gather, reduce-scatter and all-to-all. GB/s are 1e9 bytes/s.
//
// Timing: per size, each library runs `warmup` untimed calls, then `reps` timed batches of `iters` calls (iters
// shrinks with the size: --batch-bytes / size, between 1 and --max-iters). Batches alternate between the
// libraries (batch r starts with library r mod the library count) so slow drift of the machine hits all three alike. A
// batch starts after an MPI_Barrier; its time is the slowest rank's (MPI_MAX), divided by iters; the table shows the
// median batch (--stat min: the fastest). After timing, each library runs once more on a receive buffer filled with -1
// and every rank checks every element against a closed form; a wrong result prints FAIL and the exit status is 1.
//
// Page faults: every timed batch also counts the minor page faults of the process (getrusage RUSAGE_SELF
// ru_minflt, all threads), and the table shows each library's faults per call (the largest rank's). A library that
// allocates a temporary buffer per call and returns it to the kernel pays one fault per fresh 4 KiB page on every
// call (Open MPI's all-reduce and reduce-scatter with glibc's defaults, docs/performance.md); with glibc keeping
// freed memory (MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_, run.sh MODE=keep-memory) that count falls to ~0.
// The header names the configuration that decides like-for-like runs: BRAID_TRANSPORT (Braid over TCP beside
// Gloo's TCP, run.sh MODE=tcp) and the glibc malloc variables.
//
// Ceiling (on by default, --no-ceiling skips it): memcpy and float a+b->c bandwidth of one process alone and of
// all n at once on buffers of max(--maxbytes, 64 MiB) (the memory-bandwidth limit every shared-memory collective
// here lives under), and the rate at which fresh pages are first touched (the cost of a per-call temporary
// buffer).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "common/text.h"

namespace {

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kAllToAll: return "alltoall";
  }
  return "?";
}

std::optional<Coll> parseColl(const std::string& s) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAllToAll}) {
    std::string name = collName(c);
    std::string bare = name;
    bare.erase(std::remove(bare.begin(), bare.end(), '_'), bare.end());
    if (s == name || s == bare) return c;
  }
  return std::nullopt;
}

/// nccl-tests' bus bandwidth factor (busbw = algbw x factor) for n ranks.
double busFactor(Coll c, int n) { return c == Coll::kAllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n; }

/// Elements of the send and receive buffers of one rank for `elems` = size / 4.
struct Geometry {
  size_t send_elems;
  size_t recv_elems;
  size_t count;  // the `count` argument of the NCCL-shaped call
};

Geometry geometry(Coll c, size_t elems, int n) {
  switch (c) {
    case Coll::kAllReduce: return {elems, elems, elems};
    case Coll::kAllGather: return {elems / n, elems, elems / n};
    case Coll::kReduceScatter: return {elems, elems / n, elems / n};
    case Coll::kAllToAll: return {elems, elems, elems / n};
  }
  return {0, 0, 0};
}

// ---- data pattern and closed-form results (exact in float: every value is an integer below 2^24) ----

float reduceInput(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1)); }
float gatherInput(int rank, size_t i) { return static_cast<float>(rank * 8192 + static_cast<int>(i % 8191)); }
float alltoallInput(int from, int to, size_t i) {
  return static_cast<float>(from * 64 + to + 4096 * static_cast<int>(i % 1021));
}

void fillInput(Coll c, float* send, const Geometry& g, int rank, int n) {
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kReduceScatter:
      for (size_t i = 0; i < g.send_elems; ++i) send[i] = reduceInput(rank, i);
      break;
    case Coll::kAllGather:
      for (size_t i = 0; i < g.send_elems; ++i) send[i] = gatherInput(rank, i);
      break;
    case Coll::kAllToAll:
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < g.count; ++i) send[p * g.count + i] = alltoallInput(rank, p, i);
      break;
  }
}

/// Index of the first wrong element of `recv`, or -1.
long long firstWrong(Coll c, const float* recv, const Geometry& g, int rank, int n) {
  const float rank_sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < g.recv_elems; ++i) {
    float want = 0;
    switch (c) {
      case Coll::kAllReduce: want = rank_sum * static_cast<float>(i % 13 + 1); break;
      case Coll::kReduceScatter: want = rank_sum * static_cast<float>((rank * g.count + i) % 13 + 1); break;
      case Coll::kAllGather: want = gatherInput(static_cast<int>(i / g.count), i % g.count); break;
      case Coll::kAllToAll: want = alltoallInput(static_cast<int>(i / g.count), rank, i % g.count); break;
    }
    if (recv[i] != want) return static_cast<long long>(i);
  }
  return -1;
}

// ---- the three libraries ----

class Library {
 public:
  virtual ~Library() = default;
  virtual const char* name() const = 0;
  virtual bool supports(Coll c) const = 0;
  /// One call; "" on success, else the library's error text.
  virtual std::string run(Coll c, const float* send, float* recv, const Geometry& g) = 0;
};

class MpiLibrary : public Library {
 public:
  MpiLibrary() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiLibrary() override { MPI_Comm_free(&comm_); }
  const char* name() const override { return "MPI"; }
  bool supports(Coll) const override { return true; }
  std::string run(Coll c, const float* send, float* recv, const Geometry& g) override {
    const int count = static_cast<int>(g.count);
    int rc = MPI_SUCCESS;
    switch (c) {
      case Coll::kAllReduce: rc = MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm_); break;
      case Coll::kAllGather: rc = MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_); break;
      case Coll::kReduceScatter: rc = MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, comm_); break;
      case Coll::kAllToAll: rc = MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_); break;
    }
    if (rc == MPI_SUCCESS) return "";
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return std::string(text, len);
  }

 private:
  MPI_Comm comm_;
};

class GlooLibrary : public Library {
 public:
  /// Connects every pair over TCP on 127.0.0.1; the FileStore lives in `store_dir` (shared by all ranks).
  static std::unique_ptr<GlooLibrary> create(int rank, int size, const std::string& store_dir, double timeout_s,
                                             std::string* error) {
    std::unique_ptr<GlooLibrary> out;
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      gloo::rendezvous::FileStore store(store_dir);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
      context->connectFullMesh(store, device);
      out.reset(new GlooLibrary(std::move(context)));
    } catch (const std::exception& e) {
      *error = e.what();
    }
    return out;
  }
  const char* name() const override { return "Gloo"; }
  bool supports(Coll c) const override { return c != Coll::kReduceScatter; }
  std::string run(Coll c, const float* send, float* recv, const Geometry& g) override {
    float* in = const_cast<float*>(send);  // Gloo's setInput takes T*; it only reads inputs
    try {
      switch (c) {
        case Coll::kAllReduce: {
          gloo::AllreduceOptions opts(context_);
          opts.setInput(in, g.count);
          opts.setOutput(recv, g.count);
          opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          opts.setTag(tag_++);
          gloo::allreduce(opts);
          break;
        }
        case Coll::kAllGather: {
          gloo::AllgatherOptions opts(context_);
          opts.setInput(in, g.send_elems);
          opts.setOutput(recv, g.recv_elems);
          opts.setTag(tag_++);
          gloo::allgather(opts);
          break;
        }
        case Coll::kAllToAll: {
          gloo::AlltoallOptions opts(context_);
          opts.setInput(in, g.send_elems);
          opts.setOutput(recv, g.recv_elems);
          opts.setTag(tag_++);
          gloo::alltoall(opts);
          break;
        }
        case Coll::kReduceScatter: return "not supported";
      }
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

 private:
  explicit GlooLibrary(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

class BraidLibrary : public Library {
 public:
  /// Collective over MPI_COMM_WORLD: rank 0 creates the unique id, MPI_Bcast shares it.
  static std::unique_ptr<BraidLibrary> create(int rank, int size, std::string* error) {
    braidUniqueId id;
    std::memset(&id, 0, sizeof(id));
    int ok = 1;
    if (rank == 0) {
      braidResult_t rc = braidGetUniqueId(&id);
      if (rc != braidSuccess) {
        *error = std::string("braidGetUniqueId: ") + braidGetErrorString(rc);
        ok = 0;
      }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
      if (error->empty()) *error = "rank 0 could not create a Braid unique id";
      return nullptr;
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    braidComm_t comm = nullptr;
    braidResult_t rc = braidCommInitRank(&comm, size, id, rank);
    if (rc != braidSuccess) {
      *error = std::string("braidCommInitRank: ") + braidGetErrorString(rc);
      return nullptr;
    }
    return std::unique_ptr<BraidLibrary>(new BraidLibrary(comm));
  }
  ~BraidLibrary() override { braidCommDestroy(comm_); }
  const char* name() const override { return "Braid"; }
  bool supports(Coll) const override { return true; }
  std::string run(Coll c, const float* send, float* recv, const Geometry& g) override {
    braidResult_t rc = braidSuccess;
    switch (c) {
      case Coll::kAllReduce: rc = braidAllReduce(send, recv, g.count, braidFloat32, braidSum, comm_, nullptr); break;
      case Coll::kAllGather: rc = braidAllGather(send, recv, g.count, braidFloat32, comm_, nullptr); break;
      case Coll::kReduceScatter:
        rc = braidReduceScatter(send, recv, g.count, braidFloat32, braidSum, comm_, nullptr);
        break;
      case Coll::kAllToAll: rc = braidAllToAll(send, recv, g.count, braidFloat32, comm_, nullptr); break;
    }
    if (rc == braidSuccess) return "";
    return std::string(braidGetErrorString(rc)) + ": " + braidGetLastError(comm_);
  }

 private:
  explicit BraidLibrary(braidComm_t comm) : comm_(comm) {}
  braidComm_t comm_;
};

// ---- helpers ----

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double maxOverRanks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

int maxOverRanks(int v) {
  int out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

/// Minor page faults of this process so far (all threads).
long long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// A barrier that sleeps instead of spinning: ranks that wait do not take a core from one that works (4 ranks
/// share 2 cores in CI).
void sleepingBarrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(200);
  }
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
    data = static_cast<float*>(std::aligned_alloc(4096, rounded));
    if (data) std::memset(data, 0, rounded);  // every page resident before timing
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  float* data = nullptr;
};

struct Options {
  std::vector<Coll> colls = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAllToAll};
  std::vector<std::string> libraries = {"mpi", "gloo", "braid"};
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 64ull << 20;
  int step_factor = 4;
  int reps = 7;
  int warmup = 2;
  int max_iters = 50;
  uint64_t batch_bytes = 64ull << 20;
  bool ceiling = true;
  bool markdown = false;
  bool best = false;  // --stat min: the fastest batch instead of the median
  double timeout_s = 60;
};

const char* kUsage =
    "usage: braid_compare [options]   (under mpirun; perf/compare/run.sh)\n"
    "  -b, --minbytes SIZE     smallest size (nccl-tests syntax, default 1K)\n"
    "  -e, --maxbytes SIZE     largest size (default 64M)\n"
    "  -f, --stepfactor N      size multiplier between rows (default 4)\n"
    "  --colls LIST            all_reduce,all_gather,reduce_scatter,alltoall (default: all)\n"
    "  --libs LIST             mpi,gloo,braid (default: all three)\n"
    "  -n, --reps N            timed batches per library and size; the median is shown (default 7)\n"
    "  -w, --warmup N          untimed calls per library and size (default 2)\n"
    "  --max-iters N           calls per batch at small sizes (default 50)\n"
    "  --batch-bytes SIZE      calls per batch = SIZE / size, clamped to [1, max-iters] (default 64M)\n"
    "  --stat median|min       which batch the table shows (default median; min: least disturbed by other load)\n"
    "  --no-ceiling            skip the memcpy / a+b bandwidth measurement\n"
    "  --markdown              print Markdown tables\n"
    "  --timeout SECONDS       Gloo's timeout (default 60)\n";

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(braid::lowerCase(s.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

/// Parses argv; on error returns the message.
std::string parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) -> bool {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto size_value = [&](uint64_t* out) -> std::string {
      std::string v;
      if (!value(&v)) return a + ": missing value";
      auto parsed = braid::parseNcclTestsSize(v);
      if (!parsed || *parsed == 0) return a + " " + v + ": not a size (digits with K, M or G)";
      *out = *parsed;
      return "";
    };
    auto int_value = [&](int* out, int lo) -> std::string {
      std::string v;
      if (!value(&v)) return a + ": missing value";
      char* end = nullptr;
      long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || x < lo || x > 1000000) return a + " " + v + ": not an integer >= " + std::to_string(lo);
      *out = static_cast<int>(x);
      return "";
    };
    std::string err;
    std::string v;
    if (a == "-h" || a == "--help") {
      return "help";
    } else if (a == "-b" || a == "--minbytes") {
      err = size_value(&o->min_bytes);
    } else if (a == "-e" || a == "--maxbytes") {
      err = size_value(&o->max_bytes);
    } else if (a == "-f" || a == "--stepfactor") {
      err = int_value(&o->step_factor, 2);
    } else if (a == "-n" || a == "--reps") {
      err = int_value(&o->reps, 1);
    } else if (a == "-w" || a == "--warmup") {
      err = int_value(&o->warmup, 0);
    } else if (a == "--max-iters") {
      err = int_value(&o->max_iters, 1);
    } else if (a == "--batch-bytes") {
      err = size_value(&o->batch_bytes);
    } else if (a == "--timeout") {
      int t = 0;
      err = int_value(&t, 1);
      o->timeout_s = t;
    } else if (a == "--colls") {
      if (!value(&v)) return a + ": missing value";
      o->colls.clear();
      for (const std::string& name : splitList(v)) {
        auto c = parseColl(name);
        if (!c) return "--colls: unknown collective '" + name + "' (all_reduce, all_gather, reduce_scatter, alltoall)";
        o->colls.push_back(*c);
      }
    } else if (a == "--libs") {
      if (!value(&v)) return a + ": missing value";
      o->libraries = splitList(v);
      for (const std::string& name : o->libraries)
        if (name != "mpi" && name != "gloo" && name != "braid")
          return "--libs: unknown library '" + name + "' (mpi, gloo, braid)";
    } else if (a == "--stat") {
      if (!value(&v)) return a + ": missing value";
      if (v != "median" && v != "min") return "--stat " + v + ": median or min";
      o->best = v == "min";
    } else if (a == "--no-ceiling") {
      o->ceiling = false;
    } else if (a == "--markdown") {
      o->markdown = true;
    } else {
      return "unknown option '" + a + "'";
    }
    if (!err.empty()) return err;
  }
  if (o->min_bytes > o->max_bytes) return "--minbytes is larger than --maxbytes";
  if (o->max_bytes / 4 > static_cast<uint64_t>(INT_MAX)) return "--maxbytes: above MPI's int element count";
  if (o->colls.empty() || o->libraries.empty()) return "nothing to run (--colls / --libs empty)";
  return "";
}

std::string humanSize(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluG", static_cast<unsigned long long>(b >> 30));
  } else if (b >= (1ull << 20) && b % (1ull << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(b >> 20));
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(b >> 10));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(b));
  }
  return buf;
}

/// Memory-bandwidth ceiling over `bytes`, one process alone, then all at once: memcpy, c = a + b (float), and the
/// first touch of fresh anonymous memory (mmap, one write per 4 KiB page, munmap) — what a library pays when it
/// allocates a temporary buffer per call and the allocator returns it to the kernel afterwards.
void measureCeiling(int rank, int n, float* a, float* b, float* c, size_t bytes, bool markdown) {
  const size_t elems = bytes / sizeof(float);
  const int reps = 5;
  auto copy = [&] { std::memcpy(c, a, bytes); };
  auto add = [&] {
    for (size_t i = 0; i < elems; ++i) c[i] = a[i] + b[i];
  };
  auto touch = [&] {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    volatile char* q = static_cast<char*>(p);
    for (size_t i = 0; i < bytes; i += 4096) q[i] = 1;
    munmap(p, bytes);
  };
  struct Row {
    const char* what;
    double alone;  // GB/s
    double all;    // GB/s, all processes together
  };
  const char* names[3] = {"memcpy (bytes copied)", "a+b->c float (bytes of c)", "first touch, fresh pages"};
  std::vector<Row> rows;
  for (int kind = 0; kind < 3; ++kind) {
    auto work = [&] { kind == 0 ? copy() : kind == 1 ? add() : touch(); };
    work();  // warm
    // One process alone: the others wait in a sleeping barrier (they take no core).
    std::vector<double> t_alone;
    for (int r = 0; r < reps; ++r) {
      sleepingBarrier();
      if (rank == 0) {
        auto t0 = Clock::now();
        work();
        t_alone.push_back(seconds(t0, Clock::now()));
      }
      sleepingBarrier();
    }
    std::vector<double> t_all;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = Clock::now();
      work();
      t_all.push_back(maxOverRanks(seconds(t0, Clock::now())));
    }
    if (rank == 0) rows.push_back({names[kind], bytes / median(t_alone) / 1e9, n * bytes / median(t_all) / 1e9});
  }
  if (rank != 0) return;
  const double us_per_page = 4096 / (rows[2].alone * 1e3);
  if (markdown) {
    std::printf("\n| kernel, %s buffers | one process GB/s | %d processes at once, total GB/s |\n|---|---|---|\n",
                humanSize(bytes).c_str(), n);
    for (const Row& r : rows) std::printf("| %s | %.2f | %.2f |\n", r.what, r.alone, r.all);
    std::printf("\nFirst touch: %.2f us per 4 KiB page (one process).\n", us_per_page);
  } else {
    std::printf("\n# Memory ceiling, %s buffers: GB/s of one process alone, and total of %d processes at once\n",
                humanSize(bytes).c_str(), n);
    for (const Row& r : rows) std::printf("#   %-28s %8.2f   %8.2f\n", r.what, r.alone, r.all);
    std::printf("#   (first touch: %.2f us per 4 KiB page, one process)\n", us_per_page);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  Options opt;
  std::string err = parseOptions(argc, argv, &opt);
  if (err.empty() && n > 64) err = "at most 64 ranks (the all-to-all check encodes sender and receiver in 6 bits each)";
  if (!err.empty()) {
    if (rank == 0) {
      if (err != "help") std::fprintf(stderr, "braid_compare: %s\n", err.c_str());
      std::fputs(kUsage, err == "help" ? stdout : stderr);
    }
    MPI_Finalize();
    return err == "help" ? 0 : 2;
  }

  // Libraries, in the order of --libs.
  std::vector<std::unique_ptr<Library>> libs;
  for (const std::string& name : opt.libraries) {
    std::string error;
    std::unique_ptr<Library> lib;
    if (name == "mpi") {
      lib = std::make_unique<MpiLibrary>();
    } else if (name == "gloo") {
      char dir[] = "/tmp/braid_compare_gloo_XXXXXX";
      char path[sizeof(dir)] = {0};
      int ok = 1;
      if (rank == 0) {
        if (mkdtemp(dir)) {
          std::memcpy(path, dir, sizeof(dir));
        } else {
          ok = 0;
        }
      }
      MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
      MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
      if (ok) {
        auto gloo = GlooLibrary::create(rank, n, path, opt.timeout_s, &error);
        if (gloo) lib = std::move(gloo);
      } else {
        error = std::string("mkdtemp ") + dir + ": " + std::strerror(errno);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0 && ok) {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    } else {
      auto braid_lib = BraidLibrary::create(rank, n, &error);
      if (braid_lib) lib = std::move(braid_lib);
    }
    int failed = maxOverRanks(lib ? 0 : 1);
    if (failed) {
      if (!lib)
        std::fprintf(stderr, "braid_compare: rank %d: %s setup failed: %s\n", rank, name.c_str(), error.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    libs.push_back(std::move(lib));
  }
  const int nlibs = static_cast<int>(libs.size());
  int braid_index = -1;  // the ratio columns compare every other library with this one
  for (int k = 0; k < nlibs; ++k)
    if (std::strcmp(libs[k]->name(), "Braid") == 0) braid_index = k;

  AlignedBuffer send(opt.max_bytes);
  AlignedBuffer recv(opt.max_bytes);
  if (!send.data || !recv.data) {
    std::fprintf(stderr, "braid_compare: rank %d: cannot allocate 2 x %llu bytes\n", rank,
                 static_cast<unsigned long long>(opt.max_bytes));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  if (rank == 0) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::printf("# braid_compare: %d processes on %s (%ld online CPUs), float32 sum; libraries:", n, host,
                sysconf(_SC_NPROCESSORS_ONLN));
    for (const auto& l : libs) std::printf(" %s", l->name());
    std::printf(
        "\n# size = nccl-tests bytes; time = %s of %d batches (slowest rank); busbw = nccl-tests GB/s; "
        "flt/call = minor page faults per call (largest rank)\n",
        opt.best ? "fastest" : "median", opt.reps);
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v && *v ? v : "unset");
    };
    std::printf("# BRAID_TRANSPORT=%s (Braid's transport; unset = auto: shared memory on one host)\n",
                env("BRAID_TRANSPORT").c_str());
    const bool keep = std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_");
    std::printf("# glibc: MALLOC_MMAP_THRESHOLD_=%s MALLOC_TRIM_THRESHOLD_=%s (%s)\n",
                env("MALLOC_MMAP_THRESHOLD_").c_str(), env("MALLOC_TRIM_THRESHOLD_").c_str(),
                keep ? "freed memory kept: no fresh pages per call for per-call buffers below the threshold"
                     : "defaults: blocks above the mmap threshold come back as fresh pages");
    std::fflush(stdout);
  }
  if (opt.ceiling) {
    // At least 64 MiB, far beyond the caches, whatever the largest size of the sweep.
    const size_t bytes = std::max<size_t>(opt.max_bytes, 64ull << 20);
    AlignedBuffer a(bytes), b(bytes), c(bytes);
    if (a.data && b.data && c.data) measureCeiling(rank, n, a.data, b.data, c.data, bytes, opt.markdown);
  }

  bool any_failure = false;
  for (Coll c : opt.colls) {
    if (rank == 0) {
      std::printf("\n## %s, %d ranks (busbw factor %.3f)\n", collName(c), n, busFactor(c, n));
      if (opt.markdown) {
        std::printf("\n| size |");
        for (const auto& l : libs) std::printf(" %s us |", l->name());
        for (const auto& l : libs) std::printf(" %s busbw |", l->name());
        for (int k = 0; k < nlibs && braid_index >= 0; ++k)
          if (k != braid_index) std::printf(" Braid/%s |", libs[k]->name());
        for (const auto& l : libs) std::printf(" %s flt/call |", l->name());
        std::printf("\n|---|");
        for (int k = 0; k < nlibs * 3 + (braid_index >= 0 ? nlibs - 1 : 0); ++k) std::printf("---|");
        std::printf("\n");
      } else {
        std::printf("%10s %6s", "size", "iters");
        for (const auto& l : libs) std::printf(" %10s", (std::string(l->name()) + " us").c_str());
        for (const auto& l : libs) std::printf(" %11s", (std::string(l->name()) + " GB/s").c_str());
        for (int k = 0; k < nlibs && braid_index >= 0; ++k)
          if (k != braid_index) std::printf(" %11s", (std::string("Braid/") + libs[k]->name()).c_str());
        for (const auto& l : libs) std::printf(" %14s", (std::string(l->name()) + " flt/call").c_str());
        std::printf("\n");
      }
      std::fflush(stdout);
    }
    for (uint64_t size = opt.min_bytes; size <= opt.max_bytes; size *= opt.step_factor) {
      const uint64_t unit = 4ull * n;
      const uint64_t bytes = size / unit * unit;
      if (bytes == 0) continue;
      const Geometry g = geometry(c, bytes / 4, n);
      const int iters =
          static_cast<int>(std::clamp<uint64_t>(opt.batch_bytes / bytes, 1, static_cast<uint64_t>(opt.max_iters)));
      fillInput(c, send.data, g, rank, n);

      std::vector<std::string> error(nlibs);  // this rank's first error per library
      auto call = [&](int k) {
        if (!error[k].empty()) return;
        std::string e = libs[k]->run(c, send.data, recv.data, g);
        if (!e.empty()) error[k] = e;
      };
      for (int k = 0; k < nlibs; ++k) {
        if (!libs[k]->supports(c)) continue;
        for (int w = 0; w < opt.warmup; ++w) call(k);
      }
      std::vector<std::vector<double>> times(nlibs);
      std::vector<long long> faults(nlibs, 0);  // this rank's minor faults in library k's timed calls
      for (int r = 0; r < opt.reps; ++r) {
        for (int j = 0; j < nlibs; ++j) {
          const int k = (r + j) % nlibs;
          if (!libs[k]->supports(c)) continue;
          MPI_Barrier(MPI_COMM_WORLD);
          const long long f0 = minorFaults();
          auto t0 = Clock::now();
          for (int i = 0; i < iters; ++i) call(k);
          const double t = seconds(t0, Clock::now());
          faults[k] += minorFaults() - f0;
          times[k].push_back(maxOverRanks(t) / iters);
        }
      }
      std::vector<double> faults_per_call(nlibs, 0);
      for (int k = 0; k < nlibs; ++k) {
        faults_per_call[k] = maxOverRanks(static_cast<double>(faults[k]) / (static_cast<double>(opt.reps) * iters));
      }
      // Correctness: one more call into a receive buffer of -1 (no valid result value), checked everywhere.
      std::vector<int> wrong(nlibs, 0);
      for (int k = 0; k < nlibs; ++k) {
        if (!libs[k]->supports(c)) continue;
        std::fill(recv.data, recv.data + g.recv_elems, -1.0f);
        MPI_Barrier(MPI_COMM_WORLD);
        call(k);
        long long bad = error[k].empty() ? firstWrong(c, recv.data, g, rank, n) : -1;
        if (!error[k].empty()) {
          std::fprintf(stderr, "braid_compare: rank %d: %s %s %llu B: %s\n", rank, libs[k]->name(), collName(c),
                       static_cast<unsigned long long>(bytes), error[k].c_str());
        } else if (bad >= 0) {
          std::fprintf(stderr, "braid_compare: rank %d: %s %s %llu B: wrong result at element %lld (got %g)\n", rank,
                       libs[k]->name(), collName(c), static_cast<unsigned long long>(bytes), bad, recv.data[bad]);
        }
        wrong[k] = maxOverRanks((!error[k].empty() || bad >= 0) ? 1 : 0);
        if (wrong[k]) any_failure = true;
      }

      if (rank != 0) continue;
      std::vector<double> us(nlibs, -1), busbw(nlibs, -1);
      for (int k = 0; k < nlibs; ++k) {
        if (times[k].empty()) continue;
        const double t = opt.best ? *std::min_element(times[k].begin(), times[k].end()) : median(times[k]);
        us[k] = t * 1e6;
        busbw[k] = bytes / t / 1e9 * busFactor(c, n);
      }
      auto cell = [&](int k, double v, const char* fmt, int width) {
        char buf[48];
        if (!libs[k]->supports(c)) {
          std::snprintf(buf, sizeof(buf), "%*s", width, "n/a");
        } else if (wrong[k]) {
          std::snprintf(buf, sizeof(buf), "%*s", width, "FAIL");
        } else {
          std::snprintf(buf, sizeof(buf), fmt, width, v);
        }
        return std::string(buf);
      };
      auto ratio = [&](int k) {
        char buf[32];
        if (braid_index < 0 || !libs[k]->supports(c) || wrong[k] || wrong[braid_index]) {
          std::snprintf(buf, sizeof(buf), "-");
        } else {
          std::snprintf(buf, sizeof(buf), "%.2fx", us[k] / us[braid_index]);
        }
        return std::string(buf);
      };
      if (opt.markdown) {
        std::printf("| %s |", humanSize(bytes).c_str());
        for (int k = 0; k < nlibs; ++k) std::printf(" %s |", cell(k, us[k], "%*.1f", 0).c_str());
        for (int k = 0; k < nlibs; ++k) std::printf(" %s |", cell(k, busbw[k], "%*.2f", 0).c_str());
        for (int k = 0; k < nlibs && braid_index >= 0; ++k)
          if (k != braid_index) std::printf(" %s |", ratio(k).c_str());
        for (int k = 0; k < nlibs; ++k) std::printf(" %s |", cell(k, faults_per_call[k], "%*.0f", 0).c_str());
        std::printf("\n");
      } else {
        std::printf("%10s %6d", humanSize(bytes).c_str(), iters);
        for (int k = 0; k < nlibs; ++k) std::printf(" %s", cell(k, us[k], "%*.1f", 10).c_str());
        for (int k = 0; k < nlibs; ++k) std::printf(" %s", cell(k, busbw[k], "%*.3f", 11).c_str());
        for (int k = 0; k < nlibs && braid_index >= 0; ++k)
          if (k != braid_index) std::printf(" %11s", ratio(k).c_str());
        for (int k = 0; k < nlibs; ++k) std::printf(" %s", cell(k, faults_per_call[k], "%*.0f", 14).c_str());
        std::printf("\n");
      }
      std::fflush(stdout);
    }
  }
  if (rank == 0 && braid_index >= 0 && nlibs > 1) {
    std::printf("\n# Braid/X = X's time / Braid's time (> 1: Braid is faster)%s\n",
                any_failure ? "; FAIL: a wrong result or an error (stderr names rank and element)" : "");
  }
  libs.clear();  // Braid and Gloo before MPI_Finalize
  MPI_Finalize();
  return any_failure ? 1 : 0;
}
