/* A program built against NCCL's nccl.h for the NCCL-API shim's group test (shim_group_fake_test.sh), run with the
 * shim preloaded in front of the CUDA/NCCL stand-in (tests/device/fake_cuda_nccl.cc). One thread, two cases:
 *   two     - both ranks of a 2-rank communicator created in one ncclGroupStart/ncclGroupEnd (nccl-tests -g 2), then
 *             destroyed;
 *   destroy - a 2-rank communicator's rank 0 created inside a group and destroyed before the group ends (an error
 *             path): the group's end must not touch it;
 *   distinct - two 1-rank communicators of different unique ids created in one group: one rank each, not one thread
 *             driving several ranks of one communicator.
 * Prints "<call> <ncclResult_t>" per call; exit 0 when every call returned ncclSuccess. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
static void show(const char* call, ncclResult_t result) {
  printf("%s %d\n", call, (int)result);
  if (result != ncclSuccess) ++failures;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "two") != 0 && strcmp(argv[1], "destroy") != 0 &&
                    strcmp(argv[1], "distinct") != 0)) {
    fprintf(stderr, "usage: shim_group_app two|destroy|distinct\n");
    return 2;
  }
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  show("ncclGetUniqueId", ncclGetUniqueId(&id));
  ncclComm_t comms[2] = {NULL, NULL};
  show("ncclGroupStart", ncclGroupStart());
  if (strcmp(argv[1], "distinct") == 0) {
    ncclUniqueId other;
    memset(&other, 0, sizeof(other));
    show("ncclGetUniqueId", ncclGetUniqueId(&other));
    show("ncclCommInitRank 0", ncclCommInitRank(&comms[0], 1, id, 0));
    show("ncclCommInitRank 0 (other id)", ncclCommInitRank(&comms[1], 1, other, 0));
    show("ncclGroupEnd", ncclGroupEnd());
    show("ncclCommDestroy 0", ncclCommDestroy(comms[0]));
    show("ncclCommDestroy 1", ncclCommDestroy(comms[1]));
  } else if (strcmp(argv[1], "two") == 0) {
    show("ncclCommInitRank 0", ncclCommInitRank(&comms[0], 2, id, 0));
    show("ncclCommInitRank 1", ncclCommInitRank(&comms[1], 2, id, 1));
    show("ncclGroupEnd", ncclGroupEnd());
    show("ncclCommDestroy 0", ncclCommDestroy(comms[0]));
    show("ncclCommDestroy 1", ncclCommDestroy(comms[1]));
  } else {
    show("ncclCommInitRank 0", ncclCommInitRank(&comms[0], 2, id, 0));
    show("ncclCommDestroy 0", ncclCommDestroy(comms[0]));
    show("ncclGroupEnd", ncclGroupEnd());
  }
  return failures == 0 ? 0 : 1;
}
