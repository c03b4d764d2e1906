/* An NCCL program for the NCCL-API shim's GPU check (shim_gpu_check.sh): NRANKS ranks as forked processes, each with
 * its own NCCL_HOSTID so that ranks may share one GPU (NCCL then connects them through its network transport), run
 * all-reduce (sum in place and out of place, avg), all-gather and reduce-scatter on device buffers and compare every
 * element with the value computed on the host. With --braid-hosts each rank also sets BRAID_HOSTID to its NCCL_HOSTID,
 * so that Braid's bootstrap (the shim's) counts the ranks as separate hosts too. One line per rank and check: "rank R
 * <check> ok" or "rank R <check> FAILED at i: got X want Y". Exit status: 0 all correct, 1 a failure, 77 no usable GPU (the reason is printed). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define kMaxRanks 8

static float input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 13 + 1)); }

/* Compares count floats of device memory `dev` with want(i); prints one line. */
static int check(int rank, const char* what, const float* dev, size_t count, float (*want)(int, int, size_t),
                 int nranks) {
  float* host = (float*)malloc(count * sizeof(float));
  if (host == NULL || cudaMemcpy(host, dev, count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
    printf("rank %d %s FAILED: cudaMemcpy\n", rank, what);
    free(host);
    return 1;
  }
  for (size_t i = 0; i < count; ++i) {
    const float w = want(nranks, rank, i);
    if (host[i] != w) {
      printf("rank %d %s FAILED at %zu: got %g want %g\n", rank, what, i, host[i], w);
      free(host);
      return 1;
    }
  }
  printf("rank %d %s ok\n", rank, what);
  free(host);
  return 0;
}

static float wantSum(int nranks, int rank, size_t i) {
  (void)rank;
  return (float)(nranks * (nranks + 1) / 2 * (int)(i % 13 + 1));
}
static float wantAvg(int nranks, int rank, size_t i) { return wantSum(nranks, rank, i) / (float)nranks; }
static size_t g_piece = 0; /* all-gather: elements per rank */
static float wantGather(int nranks, int rank, size_t i) {
  (void)nranks;
  (void)rank;
  return input((int)(i / g_piece), i % g_piece);
}
static size_t g_offset = 0; /* reduce-scatter: this rank's first element of the input */
static float wantScatter(int nranks, int rank, size_t i) { return wantSum(nranks, rank, g_offset + i); }

static int fill(float* dev, int rank, size_t count) {
  float* host = (float*)malloc(count * sizeof(float));
  if (host == NULL) return 1;
  for (size_t i = 0; i < count; ++i) host[i] = input(rank, i);
  const int bad = cudaMemcpy(dev, host, count * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess;
  free(host);
  return bad;
}

#define NCCL_OK(call)                                                              \
  do {                                                                             \
    ncclResult_t r_ = (call);                                                      \
    if (r_ != ncclSuccess) {                                                       \
      printf("rank %d %s: %s\n", rank, #call, ncclGetErrorString(r_));             \
      return 1;                                                                    \
    }                                                                              \
  } while (0)
#define CUDA_OK(call)                                                              \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      printf("rank %d %s: %s\n", rank, #call, cudaGetErrorString(e_));             \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static int runRank(int rank, int nranks, int braid_hosts, int id_read, const int* id_write) {
  char host_id[64];
  snprintf(host_id, sizeof(host_id), "braid-shim-check-%d", rank);
  setenv("NCCL_HOSTID", host_id, 1);
  if (braid_hosts) setenv("BRAID_HOSTID", host_id, 1); /* Braid's bootstrap sees every rank as its own host too */
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    printf("rank %d: no usable GPU: %s\n", rank, counted != cudaSuccess ? cudaGetErrorString(counted) : "0 devices");
    return 77;
  }
  CUDA_OK(cudaSetDevice(rank % devices));
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    for (int r = 1; r < nranks; ++r)
      if (write(id_write[r], &id, sizeof(id)) != (ssize_t)sizeof(id)) return 1;
  } else if (read(id_read, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
    printf("rank %d: no unique id from rank 0\n", rank);
    return 1;
  }
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  const size_t count = 4096; /* 16 KiB of floats */
  float* send = NULL;
  float* recv = NULL;
  CUDA_OK(cudaMalloc((void**)&send, count * nranks * sizeof(float)));
  CUDA_OK(cudaMalloc((void**)&recv, count * nranks * sizeof(float)));
  int failures = 0;

  /* all-reduce sum, out of place, then in place */
  if (fill(send, rank, count)) return 1;
  NCCL_OK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  failures += check(rank, "allreduce sum out-of-place", recv, count, wantSum, nranks);
  NCCL_OK(ncclAllReduce(send, send, count, ncclFloat, ncclSum, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  failures += check(rank, "allreduce sum in-place", send, count, wantSum, nranks);
  /* all-reduce avg on a count that is not a power of two */
  if (fill(send, rank, 1000)) return 1;
  NCCL_OK(ncclAllReduce(send, recv, 1000, ncclFloat, ncclAvg, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  failures += check(rank, "allreduce avg out-of-place", recv, 1000, wantAvg, nranks);
  /* all-gather, out of place */
  if (fill(send, rank, count)) return 1;
  g_piece = count;
  NCCL_OK(ncclAllGather(send, recv, count, ncclFloat, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  failures += check(rank, "allgather out-of-place", recv, count * nranks, wantGather, nranks);
  /* reduce-scatter, out of place (no Braid algorithm: NCCL) */
  if (fill(send, rank, count * nranks)) return 1;
  g_offset = (size_t)rank * count;
  NCCL_OK(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  failures += check(rank, "reducescatter sum out-of-place", recv, count, wantScatter, nranks);

  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
  NCCL_OK(ncclCommDestroy(comm));
  return failures > 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 2;
  const int braid_hosts = argc > 2 && strcmp(argv[2], "--braid-hosts") == 0;
  if (nranks < 2 || nranks > kMaxRanks || argc > 3 || (argc == 3 && !braid_hosts)) {
    fprintf(stderr, "usage: %s [NRANKS 2..%d [--braid-hosts]]\n", argv[0], kMaxRanks);
    return 2;
  }
  int pipes[kMaxRanks][2];
  for (int r = 0; r < nranks; ++r)
    if (pipe(pipes[r]) != 0) return 1;
  pid_t pids[kMaxRanks];
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(300); /* a hang fails the check */
      int writers[kMaxRanks];
      for (int q = 0; q < nranks; ++q) writers[q] = pipes[q][1];
      const int status = runRank(r, nranks, braid_hosts, pipes[r][0], writers);
      fflush(stdout);
      _exit(status);
    }
  }
  int worst = 0;
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) printf("rank %d exited with %d\n", r, code);
    if (code == 77 && worst == 0) worst = 77;
    if (code != 0 && code != 77) worst = 1;
  }
  return worst;
}
