// Pairwise-exchange all-to-all (Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005, §"All-to-all"):
// n-1 rounds; in round k rank r sends its chunk for r+k and receives rank r-k's chunk for it. Round
// k waits for round k-1 to finish, so a rank has one message in flight in each direction, which is
// the point of the algorithm on fabrics that suffer from incast. Cost (n-1)α + (n-1)/n·N·β.
//
// In-place calls: a chunk received in round k would overwrite the input chunk sent in round n-k,
// so receives land in scratch and are copied to the output after the last round.
#include "braid/classic_blocks.h"

namespace braid::algos {

Status buildPairwise(ProgramBuilder& b) {
  const int n = b.numRanks();
  const bool stage = b.refsInPlace();
  for (int r = 0; r < n; ++r) {
    StepRef prev_round;
    int last_tb = -1;
    for (int k = 1; k < n; ++k) {
      const int to = (r + k) % n;
      const int from = (r - k + n) % n;
      const int tb = b.newTb(r, to, from, 0);
      if (k == 1) {
        const Loc self_in = b.in(r, r);
        const Loc self_out = b.out(r, r);
        if (!b.same(self_in, self_out)) b.copy(r, tb, self_in, self_out, 1);
      }
      b.send(r, tb, b.in(r, to), 1, {prev_round});
      prev_round = b.recv(r, tb, stage ? ProgramBuilder::scratch(from) : b.out(r, from), 1);
      last_tb = tb;
    }
    if (stage) {
      // Everything has been sent and received once the last round's receive is done.
      if (r > 0) b.copy(r, last_tb, ProgramBuilder::scratch(0), b.out(r, 0), r);
      if (r < n - 1) b.copy(r, last_tb, ProgramBuilder::scratch(r + 1), b.out(r, r + 1), n - 1 - r);
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
