/* The C interface between the NCCL-API shim (libbraid_nccl.so) and its companion libbraid_nccl_pareto.so
 * (shim/pareto/README.md): the one function the companion exports, which synthesizes the Pareto set of BRAID_TOPOLOGY
 * for the collectives asked and returns it as text the shim loads (ShimAlgorithms::fromParetoSet, decision.h). The
 * shim dlopens the companion only when BRAID_TOPOLOGY names a topology with as many GPUs as a communicator has
 * ranks, so a program that does not ask never loads the synthesizer or Z3.
 *
 * The returned text is JSON (docs/nccl.md, "BRAID_TOPOLOGY: the Pareto set at init"):
 *   {"format": "braid-nccl-pareto-set/1", "topology": <as asked>, "ranks": N,
 *    "collectives": [{"collective": "allreduce", "windows": [{"min_bytes": 0, "max_bytes": 131071, "nccl": false,
 *                     "source": "synthesized dgx-a100-x1 / LL", "msccl_xml": "<algo ...>"}, ...],
 *                     "notes": [...]}, ...],
 *    "skipped": ["alltoall: ...", ...]}
 * Windows are in increasing order and cover 0 .. 2^64-1 bytes (nccl-tests bytes, inclusive) without gaps; a window
 * with "nccl": true is one where NCCL's own choice is predicted faster (no "msccl_xml": the shim leaves it to NCCL);
 * every other window carries its algorithm as MSCCL XML with minBytes / maxBytes set to the window and MSCCL
 * instances written out (what `braid synth --sizes ... -o DIR` writes). "skipped" names each collective asked that
 * has no set, with why (a failed synthesis, the budget spent). */
#ifndef BRAID_NCCL_SHIM_PARETO_ABI_H_
#define BRAID_NCCL_SHIM_PARETO_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The exported function's name and its symbol version (the companion's version script). */
#define BRAID_NCCL_PARETO_SYMBOL "braidNcclParetoSet_v1"
#define BRAID_NCCL_PARETO_VERSION "BRAID_NCCL_PARETO_1"
/* The companion's file name; the shim looks beside libbraid_nccl.so, then on the loader's search path. */
#define BRAID_NCCL_PARETO_LIBRARY "libbraid_nccl_pareto.so"

typedef struct {
  /* A topology file (Braid YAML, NCCL topology XML, `nvidia-smi topo -m`, TACCL JSON) or a shipped name, as
     BRAID_TOPOLOGY takes it. */
  const char* topology;
  /* The communicator's rank count: must equal the topology's GPU count. */
  int nranks;
  /* Collectives in the order they are synthesized, separated by ',' (allreduce, allgather, reducescatter,
     alltoall; blanks around names ignored). */
  const char* collectives;
  /* Wall-clock budget of the whole set, seconds (> 0): collectives are synthesized in order, each synthesis limited
     to half an equal share of the time left, none started or continued past the budget. */
  double time_limit_s;
} braidNcclParetoRequest_v1;

/* Returns 0 and sets *set_json to the set (NUL-terminated, malloc'd: free() it), or a Braid status code (4 invalid
   argument: a bad request, a topology whose GPU count is not nranks; 101 not found: no such topology; 103 timeout:
   the budget ended before any collective's set was complete; 104 unsupported: no collective has a set; 3 internal
   error) and sets *error to a one-line message (malloc'd: free() it). Either pointer may be null (then nothing is
   returned through it). Never throws, never aborts. Thread-safe. */
typedef int (*braidNcclParetoSet_v1_fn)(const braidNcclParetoRequest_v1* request, char** set_json, char** error);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_NCCL_SHIM_PARETO_ABI_H_ */
