/* A Mixture-of-Experts layer on Braid's C API (include/braid/braid_moe.h): 4 ranks as threads of this process, 8
 * experts (2 per rank), top-2 gating with capacity factor 1.25 (rounded up), each expert a small linear layer.
 * Every rank routes its tokens, dispatches them to the experts' ranks, runs its local experts on what it received,
 * and combines the outputs with the gate weights; then it recomputes the whole layer for its own tokens locally
 * (every expert's weights are known everywhere here) and compares. Prints per-rank routing statistics; exits 1 on
 * a mismatch or an error, 2 on a bad argument.
 *
 *   build/bin/moe_layer_example [tokens_per_rank] [hidden]
 *
 * tokens_per_rank: 1..65536 (default 256); hidden: 1..4096 (default 64); their product at most 2^22, so that one
 * rank's activations stay within 16 MiB of floats.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid/braid.h"
#include "braid/braid_moe.h"

#define RANKS 4
#define EXPERTS 8
#define TOP_K 2

#define MAX_TOKENS 65536
#define MAX_HIDDEN 4096
#define MAX_TOKENS_X_HIDDEN (1u << 22)

static size_t g_tokens = 256;
static size_t g_hidden = 64;
static braidComm_t g_comms[RANKS];
static int g_failed = 0;

/* Deterministic pseudo-random values (splitmix64). */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static float uniform(uint64_t seed) { return (float)(mix(seed) >> 40) / (float)(1u << 24) - 0.5f; }

/* Expert e: y = W_e x, W_e[i][j] = uniform(e, i, j). */
static void expert(int e, const float* x, float* y) {
  for (size_t i = 0; i < g_hidden; ++i) {
    float acc = 0;
    for (size_t j = 0; j < g_hidden; ++j) acc += uniform(((uint64_t)e << 40) ^ (i << 20) ^ j) * x[j];
    y[i] = acc;
  }
}

/* The gate: scores from a fixed projection, top-2 experts, softmax over the two scores. */
static void gate(const float* x, int32_t* ids, float* weights) {
  float score[EXPERTS];
  for (int e = 0; e < EXPERTS; ++e) {
    score[e] = 0;
    for (size_t j = 0; j < g_hidden; ++j) score[e] += uniform(0xC0FFEEull ^ ((uint64_t)e << 32) ^ j) * x[j];
  }
  int a = 0;
  for (int e = 1; e < EXPERTS; ++e)
    if (score[e] > score[a]) a = e;
  int b = a == 0 ? 1 : 0;
  for (int e = 0; e < EXPERTS; ++e)
    if (e != a && score[e] > score[b]) b = e;
  const float ea = expf(score[a] - score[a]), eb = expf(score[b] - score[a]);
  ids[0] = a, ids[1] = b;
  weights[0] = ea / (ea + eb), weights[1] = eb / (ea + eb);
}

/* malloc/calloc that end the process (exit 1) when memory runs out: the other ranks wait on this one in the
 * collectives, so returning from one thread would leave them hanging. */
static void* allocate(int rank, size_t count, size_t size, const char* what, int zero) {
  void* p = zero ? calloc(count, size) : malloc(count * size);
  if (p == NULL) {
    fprintf(stderr, "rank %d: cannot allocate %zu x %zu bytes for %s\n", rank, count, size, what);
    exit(1);
  }
  return p;
}

#define CHECK(call)                                                                                             \
  do {                                                                                                          \
    braidResult_t r_ = (call);                                                                                  \
    if (r_ != braidSuccess) {                                                                                   \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #call, braidGetErrorString(r_), braidGetLastError(comm)); \
      g_failed = 1;                                                                                             \
      return NULL;                                                                                              \
    }                                                                                                           \
  } while (0)

static void* runRank(void* arg) {
  const int rank = (int)(intptr_t)arg;
  braidComm_t comm = g_comms[rank];
  const size_t T = g_tokens, H = g_hidden;
  float* x = allocate(rank, T * H, sizeof(float), "the tokens", 0);
  int32_t* ids = allocate(rank, T * TOP_K, sizeof(int32_t), "the expert ids", 0);
  float* w = allocate(rank, T * TOP_K, sizeof(float), "the gate weights", 0);
  for (size_t t = 0; t < T; ++t) {
    for (size_t h = 0; h < H; ++h) x[t * H + h] = uniform(((uint64_t)rank << 48) ^ (t << 16) ^ h);
    gate(&x[t * H], &ids[t * TOP_K], &w[t * TOP_K]);
  }
  /* Capacity factor 1.25: slots per (rank, expert) = ceil(1.25 x T x top_k / experts), rounded up as Tutel and
   * DeepSpeed do (DeepSpeed-MoE's sharded_moe.py _capacity: ceil(tokens / experts x capacity_factor), at least
   * min_capacity), so one token or more always has at least one slot per expert: with floor, fewer than 4 tokens
   * per rank would give capacity 0 and drop every slot. In integers: ceil(5 T k / (4 E)). */
  const int64_t capacity = (int64_t)((5 * T * TOP_K + 4 * EXPERTS - 1) / (4 * EXPERTS));
  braidMoePlan_t plan;
  size_t rows = 0;
  CHECK(braidMoePlanCreate(ids, T, TOP_K, EXPERTS, capacity, comm, &plan, &rows));
  int64_t counts[EXPERTS / RANKS], dropped = 0, sent = 0;
  CHECK(braidMoeExpertCounts(plan, counts));
  CHECK(braidMoeSlotCounts(plan, &dropped, &sent));
  float* in = allocate(rank, (rows + 1) * H, sizeof(float), "the dispatched rows", 0);
  float* out = allocate(rank, (rows + 1) * H, sizeof(float), "the expert outputs", 0);
  CHECK(braidMoeDispatch(plan, x, H, braidFloat32, in));
  size_t row = 0;
  for (int j = 0; j < EXPERTS / RANKS; ++j)
    for (int64_t n = 0; n < counts[j]; ++n, ++row) expert(rank * (EXPERTS / RANKS) + j, &in[row * H], &out[row * H]);
  float* y = allocate(rank, T * H, sizeof(float), "the combined outputs", 0);
  CHECK(braidMoeCombine(plan, out, H, braidFloat32, w, y));
  CHECK(braidMoePlanDestroy(plan));

  /* The same layer computed locally: the admitted slots are the first `capacity` per expert in priority order. */
  int64_t used[EXPERTS] = {0};
  float* ref = allocate(rank, T * H, sizeof(float), "the local reference", 1);
  float* tmp = allocate(rank, H, sizeof(float), "one expert output", 0);
  for (int k = 0; k < TOP_K; ++k) {
    for (size_t t = 0; t < T; ++t) {
      const int e = ids[t * TOP_K + k];
      if (used[e] >= capacity) continue;
      ++used[e];
      expert(e, &x[t * H], tmp);
      for (size_t h = 0; h < H; ++h) ref[t * H + h] += w[t * TOP_K + k] * tmp[h];
    }
  }
  double worst = 0;
  for (size_t i = 0; i < T * H; ++i) worst = fmax(worst, fabs((double)ref[i] - (double)y[i]));
  printf("rank %d: %zu tokens, %lld slots sent, %lld dropped by capacity %lld, %zu rows for experts %d..%d "
         "(%lld + %lld), max |distributed - local| = %.3g\n",
         rank, T, (long long)sent, (long long)dropped, (long long)capacity, rows, rank * 2, rank * 2 + 1,
         (long long)counts[0], (long long)counts[1], worst);
  if (worst > 1e-4) g_failed = 1;
  free(x), free(ids), free(w), free(in), free(out), free(y), free(ref), free(tmp);
  return NULL;
}

/* Parses `text` as a decimal integer in [1, max] with nothing after it; false otherwise. */
static int parseCount(const char* text, size_t max, size_t* value) {
  if (text[0] < '0' || text[0] > '9') return 0; /* no sign, no leading space */
  errno = 0;
  char* end = NULL;
  const unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > max) return 0;
  *value = (size_t)v;
  return 1;
}

/* Prints `problem` and the usage to stderr; returns the exit status for a bad argument, 2. */
static int usage(const char* argv0, const char* problem, const char* argument) {
  fprintf(stderr,
          "%s%s%s\nusage: %s [tokens_per_rank] [hidden]\n  tokens_per_rank: integer in 1..%d (default 256)\n"
          "  hidden: integer in 1..%d (default 64)\n  tokens_per_rank x hidden: at most %u\n",
          problem, argument ? ": " : "", argument ? argument : "", argv0, MAX_TOKENS, MAX_HIDDEN,
          MAX_TOKENS_X_HIDDEN);
  return 2;
}

int main(int argc, char** argv) {
  if (argc > 3) return usage(argv[0], "too many arguments", NULL);
  if (argc > 1 && !parseCount(argv[1], MAX_TOKENS, &g_tokens))
    return usage(argv[0], "bad tokens_per_rank", argv[1]);
  if (argc > 2 && !parseCount(argv[2], MAX_HIDDEN, &g_hidden)) return usage(argv[0], "bad hidden", argv[2]);
  if (g_tokens * g_hidden > MAX_TOKENS_X_HIDDEN)
    return usage(argv[0], "tokens_per_rank x hidden is too large", NULL);
  braidResult_t r = braidCommInitAll(g_comms, RANKS, NULL);
  if (r != braidSuccess) {
    fprintf(stderr, "braidCommInitAll: %s\n", braidGetErrorString(r));
    return 1;
  }
  pthread_t threads[RANKS];
  for (int i = 0; i < RANKS; ++i) {
    const int e = pthread_create(&threads[i], NULL, runRank, (void*)(intptr_t)i);
    if (e != 0) {
      fprintf(stderr, "pthread_create for rank %d: %s\n", i, strerror(e));
      return 1; /* the ranks already started wait on this one: ending the process ends them */
    }
  }
  for (int i = 0; i < RANKS; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < RANKS; ++i) braidCommDestroy(g_comms[i]);
  printf("%s\n", g_failed ? "FAILED" : "the distributed layer equals the local one on every rank");
  return g_failed ? 1 : 0;
}
