// perf/calibrate: fits the simulator's protocol/link efficiencies and latencies on one published NCCL
// all-reduce table (Azure ND A100 v4) and predicts others (Azure ND H100 v5; the realcases 2-node H100
// nccl-tests log), with NCCL's own algorithm choice per size simulated in Braid's simulator; and fits the
// per-step handshake of NCCL's p2p network connections (SimModel::p2p_net_step_us) on the realcases H20
// all-to-all log, NCCL's grouped send/recv simulated with NCCL's p2p channels and chunks. docs/simulator.md
// ("Calibration") shows the output and how the fitted numbers became SimModel::defaults().
//
//   calibrate [--fit] [--shared DIR]
// Without --fit it evaluates SimModel::defaults() on every case; with --fit it first fits (coordinate descent on
// the squared log error: NVLink parameters on the ND A100 v4 fit sizes, then p2p_net_step_us on the H20 all-to-all
// sizes >= 1 MiB) and prints the fitted model. Exit 1 when a gated row is outside its tolerance.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "braid/nccl_model.h"
#include "braid/simulate.h"
#include "braid/topology.h"
#include "calibration/calibration.h"

int main(int argc, char** argv) {
  bool fit = false;
  std::string shared = BRAID_SHARED_DIR;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fit") == 0) {
      fit = true;
    } else if (std::strcmp(argv[i], "--shared") == 0 && i + 1 < argc) {
      shared = argv[++i];
    } else {
      std::fprintf(stderr, "usage: calibrate [--fit] [--shared DIR]\n");
      return 2;
    }
  }
  braid::SimModel model = braid::SimModel::defaults();
  auto cases = braid::calibration::publishedCases(shared);
  if (!cases.isOk()) {
    std::fprintf(stderr, "calibrate: %s\n", cases.status().toString().c_str());
    return 1;
  }
  if (fit) {
    auto fitted = braid::calibration::fitModel(cases.value()[0], model, /*verbose=*/true);
    if (fitted.isOk()) {
      model = fitted.value();
      if (const auto* a2a = braid::calibration::findCase(cases.value(), "h20-vm-x2.yaml")) {
        fitted = braid::calibration::fitAllToAllModel(*a2a, model, /*verbose=*/true);
      }
    }
    if (!fitted.isOk()) {
      std::fprintf(stderr, "calibrate: %s\n", fitted.status().toString().c_str());
      return 1;
    }
    model = fitted.value();
    std::printf("%s\n", braid::calibration::describeModel(model).c_str());
  }
  bool all_ok = true;
  for (const auto& c : cases.value()) {
    auto table = braid::calibration::evaluate(c, model);
    if (!table.isOk()) {
      std::fprintf(stderr, "calibrate: %s: %s\n", c.name.c_str(), table.status().toString().c_str());
      return 1;
    }
    std::printf("%s\n", braid::calibration::formatTable(c, table.value()).c_str());
    all_ok = all_ok && braid::calibration::withinTolerance(c, table.value());
  }
  return all_ok ? 0 : 1;
}
