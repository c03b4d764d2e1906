// A shared object (as NCCL's net and tuner plugins are) that links Braid's static libraries: it links only when
// they were compiled position-independent. Exports one function that runs an all-reduce on 2 ranks.
#include <thread>
#include <vector>

#include "braid/braid.h"

extern "C" int consumerPluginAllReduce() {
  braidComm_t comms[2] = {};
  if (braidCommInitAll(comms, 2, nullptr) != braidSuccess) return 1;
  int wrong = 0;
  std::vector<std::thread> threads;
  std::vector<float> x0(64, 1.0f), x1(64, 2.0f);
  threads.emplace_back(
      [&] { wrong += braidAllReduce(x0.data(), x0.data(), 64, braidFloat, braidSum, comms[0], nullptr); });
  threads.emplace_back(
      [&] { wrong += braidAllReduce(x1.data(), x1.data(), 64, braidFloat, braidSum, comms[1], nullptr); });
  for (auto& t : threads) t.join();
  for (braidComm_t c : comms) braidCommDestroy(c);
  for (size_t i = 0; i < x0.size(); ++i) wrong += x0[i] != 3.0f || x1[i] != 3.0f;
  return wrong;
}
