// Links braid::braid_comm alone. Runs an all-reduce on 2 ranks (threads of this process) through the C API; with
// an argument (a folder of MSCCL XML / Braid JSON files written offline), runs a second one through the C++ API
// with that folder as the algorithm directory and checks the call runs an algorithm from it.
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "braid/comm.h"

namespace {

constexpr int kRanks = 2;

// 1000 doubles per rank, rank r holding (r + 1) * (i + 1): the sum over 2 ranks is 3 * (i + 1).
bool checkSum(const std::vector<double>& x) {
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != 3.0 * static_cast<double>(i + 1)) return false;
  return true;
}

std::vector<double> input(int rank) {
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (rank + 1.0) * static_cast<double>(i + 1);
  return x;
}

int cApiAllReduce() {
  braidComm_t comms[kRanks] = {};
  if (braidCommInitAll(comms, kRanks, nullptr) != braidSuccess) return 1;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<double> x = input(r);
      if (braidAllReduce(x.data(), x.data(), x.size(), braidDouble, braidSum, comms[r], nullptr) != braidSuccess)
        ++wrong;
      if (!checkSum(x)) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  for (braidComm_t c : comms) braidCommDestroy(c);
  std::printf("allreduce on %d ranks: %s\n", kRanks, wrong == 0 ? "ok" : "wrong");
  return wrong == 0 ? 0 : 1;
}

int offlineAlgorithmAllReduce(const std::string& dir) {
  braid::Result<braid::UniqueId> id = braid::createUniqueId("127.0.0.1:0");
  if (!id.isOk()) return 1;
  braid::CommOptions options;
  options.transport = "threads";
  options.algo_dir = dir;
  std::atomic<int> wrong{0};
  std::vector<std::string> sources(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = braid::Communicator::create(*id, r, kRanks, options);
      if (!comm.isOk()) {
        std::printf("rank %d: %s\n", r, comm.status().toString().c_str());
        ++wrong;
        return;
      }
      std::vector<double> send = input(r), recv(send.size());
      auto choice = (*comm)->choose(braid::CollectiveKind::kAllReduce, send.size() * sizeof(double), false);
      if (choice.isOk()) sources[r] = choice->algorithm + " from " + choice->source;
      const braid::Status status =
          (*comm)->allReduce(send.data(), recv.data(), send.size(), braid::DataType::kFloat64, braid::ReduceOp::kSum);
      if (!status.isOk() || !checkSum(recv)) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  std::printf("allreduce with %s: %s\n", sources[0].c_str(), wrong == 0 ? "ok" : "wrong");
  return wrong == 0 && sources[0].find("BRAID_ALGO_DIR") != std::string::npos ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (cApiAllReduce() != 0) return 1;
  if (argc > 1 && offlineAlgorithmAllReduce(argv[1]) != 0) return 1;
  return 0;
}
