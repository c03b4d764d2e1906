/* A program built against NCCL's nccl.h and linked with the real libnccl, for the NCCL-API shim's preload test
 * (shim_preload_test.cc). It calls the entry points libbraid_nccl.so defines, once each, and prints one line per
 * call: "<entry> <ncclResult_t>". Data calls use a NULL communicator (NCCL refuses them with an argument error, no
 * GPU needed); the communicator of ncclCommInitRank, when a GPU lets it be created, is destroyed at the end. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

static void show(const char* entry, ncclResult_t result) { printf("%s %d\n", entry, (int)result); }

int main(void) {
  int version = 0;
  show("ncclGetVersion", ncclGetVersion(&version));
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  const ncclResult_t got_id = ncclGetUniqueId(&id);
  show("ncclGetUniqueId", got_id);
  ncclComm_t comm = NULL;
  if (got_id == ncclSuccess) show("ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0));

  ncclComm_t none = NULL;
  float buf[64];
  memset(buf, 0, sizeof(buf));
  show("ncclAllReduce", ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, none, NULL));
  show("ncclAllGather", ncclAllGather(buf, buf + 16, 8, ncclFloat, none, NULL));
  show("ncclReduceScatter", ncclReduceScatter(buf, buf + 32, 8, ncclFloat, ncclMax, none, NULL));
  show("ncclBroadcast", ncclBroadcast(buf, buf + 16, 16, ncclFloat, 0, none, NULL));
  show("ncclBcast", ncclBcast(buf, 16, ncclInt32, 0, none, NULL));
  show("ncclReduce", ncclReduce(buf, buf + 16, 16, ncclFloat, ncclSum, 0, none, NULL));
  show("ncclAlltoAll", ncclAlltoAll(buf, buf + 32, 4, ncclFloat, none, NULL));
  show("ncclGroupStart", ncclGroupStart());
  show("ncclSend", ncclSend(buf, 16, ncclFloat, 0, none, NULL));
  show("ncclRecv", ncclRecv(buf + 16, 16, ncclFloat, 0, none, NULL));
  show("ncclGroupEnd", ncclGroupEnd());
  if (comm != NULL) show("ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}
