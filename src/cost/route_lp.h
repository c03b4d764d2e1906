// Internal to braid_cost, shared by the two linear programs over Braid's routes: the route-constrained bound
// (route_bound.cc) and the all-to-all max-concurrent flow (flow_bound.cc).
#pragma once

#include <glpk.h>

#include <string>
#include <vector>

#include "braid/status.h"
#include "braid/topology.h"

namespace braid::cost_internal {

/// One ordered GPU pair and the physical links its route (Topology::route) crosses.
struct PairRoute {
  int src = 0;  // rank
  int dst = 0;  // rank
  std::vector<int> links;
};

/// The GPU name of `rank`, for messages.
std::string rankName(const Topology& t, int rank);

/// Every GPU pair's route (pairs without one are left out); checks the links on them and that the routes join
/// every GPU to every other, relaying through GPUs. Errors: kInvalidArgument naming the link or GPU.
Result<std::vector<PairRoute>> gpuRoutes(const Topology& t);

/// A constraint matrix in GLPK's 1-based triplet form (entry 0 unused), built entry by entry, loaded at once.
class GlpkMatrix {
 public:
  void add(int row, int col, double value) {
    ia_.push_back(row);
    ja_.push_back(col);
    ar_.push_back(value);
  }
  void load(glp_prob* lp) { glp_load_matrix(lp, static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data()); }

 private:
  std::vector<int> ia_ = {0}, ja_ = {0};
  std::vector<double> ar_ = {0};
};

/// Owns a glp_prob and silences GLPK's terminal output for its lifetime (restoring the previous setting).
class GlpkProblem {
 public:
  GlpkProblem() : previous_term_(glp_term_out(GLP_OFF)), lp_(glp_create_prob()) {}
  ~GlpkProblem() {
    glp_delete_prob(lp_);
    glp_term_out(previous_term_);
  }
  GlpkProblem(const GlpkProblem&) = delete;
  GlpkProblem& operator=(const GlpkProblem&) = delete;
  glp_prob* get() { return lp_; }

 private:
  int previous_term_;
  glp_prob* lp_;
};

/// Scales `lp` (GLP_SF_AUTO), runs glp_simplex on it silently with `method` (GLP_PRIMAL, GLP_DUALP), GLPK's presolver
/// on or off and a limit of `time_limit_ms` (INT_MAX: none), and returns the optimal objective. `what` starts every
/// message ("route bound", "all-to-all flow"). Errors: kTimeout when GLPK stops at the time limit; kInternalError when
/// it fails, finds no optimum or returns an objective that is negative or not finite (GLPK's codes in the message).
Result<double> solveSimplex(const Topology& t, glp_prob* lp, int method, bool presolve, int time_limit_ms,
                            const std::string& what);

}  // namespace braid::cost_internal
