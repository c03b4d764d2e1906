// verify(): hand-built algorithms whose correctness is reasoned out step by step in the comments,
// then each broken in one specific way, asserting the issue kind and the (rank, chunk) it names.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <tuple>
#include <vector>

#include "braid/algorithm.h"
#include "support/ir_steps.h"

namespace braid {
namespace {

using B = BufferKind;
using O = OpType;

using testing::copy;
using testing::nop;
using testing::recv;
using testing::send;
using testing::step;
using testing::tb;

Algorithm makeAlgorithm(CollectiveKind kind, int n, int num_chunks, bool in_place, bool out_of_place) {
  Algorithm a;
  a.name = "hand";
  a.collective = kind;
  a.collective_name = collectiveName(kind);
  a.num_ranks = n;
  a.num_chunks = num_chunks;
  a.in_place = in_place;
  a.out_of_place = out_of_place;
  a.ranks.resize(n);
  for (int r = 0; r < n; ++r) a.ranks[r].rank = r;
  return a;
}

void setChunks(Algorithm& a, int in, int out, int scratch = 0) {
  for (RankProgram& p : a.ranks) {
    p.input_chunks = in;
    p.output_chunks = out;
    p.scratch_chunks = scratch;
  }
}

std::vector<VerifyIssue> ofKind(const VerifyReport& report, IssueKind kind) {
  std::vector<VerifyIssue> out;
  for (const VerifyIssue& issue : report.issues) {
    if (issue.kind == kind) out.push_back(issue);
  }
  return out;
}

// (rank, chunk) of every issue of one kind, sorted.
std::vector<std::pair<int, int>> rankChunks(const VerifyReport& report, IssueKind kind) {
  std::vector<std::pair<int, int>> out;
  for (const VerifyIssue& issue : ofKind(report, kind)) out.emplace_back(issue.rank, issue.chunk);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::tuple<int, int, int>> rankTbSteps(const VerifyReport& report, IssueKind kind) {
  std::vector<std::tuple<int, int, int>> out;
  for (const VerifyIssue& issue : ofKind(report, kind)) out.emplace_back(issue.rank, issue.tb, issue.step);
  std::sort(out.begin(), out.end());
  return out;
}

bool hasKindOnly(const VerifyReport& report, IssueKind kind) {
  return !report.issues.empty() &&
         std::all_of(report.issues.begin(), report.issues.end(), [&](const VerifyIssue& i) { return i.kind == kind; });
}

// ---- 2-rank allgather, out of place, c = 1 -------------------------------------------------------
// Rank r (peer p = 1-r), one threadblock: copy i[0] -> o[r]; send i[0] to p; receive p's chunk into o[p].
// Afterwards o[r] = {(r,0)} (own copy) and o[p] = {(p,0)} (received), i.e. o[k] = {(k,0)}.
Algorithm allGather2() {
  Algorithm a = makeAlgorithm(CollectiveKind::kAllGather, 2, 2, false, true);
  setChunks(a, 1, 2);
  for (int r = 0; r < 2; ++r) {
    const int p = 1 - r;
    a.ranks[r].threadblocks.push_back(
        tb(0, p, p, {copy(B::kInput, 0, B::kOutput, r), send(B::kInput, 0), recv(B::kOutput, p)}));
  }
  return a;
}

TEST(VerifyAllGather, TwoRanksCorrect) {
  VerifyReport report = verify(allGather2());
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_EQ(report.modes_checked, std::vector<std::string>{"out-of-place"});
  EXPECT_EQ(report.total_issues, 0);
  EXPECT_EQ(report.toString(), "");
}

TEST(VerifyAllGather, WrongReceiveOffsetNamesBothChunks) {
  Algorithm a = allGather2();
  a.ranks[1].threadblocks[0].steps[2].dst_off = 1;  // receives rank 0's chunk over its own
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kPostcondition)) << report.toString();
  EXPECT_EQ(rankChunks(report, IssueKind::kPostcondition), (std::vector<std::pair<int, int>>{{1, 0}, {1, 1}}));
  const std::string text = report.toString();
  EXPECT_NE(text.find("rank 1 output chunk 0: expected {(0,0)} got undefined"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 output chunk 1: expected {(1,0)} got {(0,0)}"), std::string::npos) << text;
  EXPECT_NE(text.find("out-of-place: postcondition:"), std::string::npos) << text;
}

TEST(VerifyAllGather, SameProgramIsAlsoCorrectInPlace) {
  // The same program used in place: input i[0] of rank 1 IS o[1]; rank 1 copies i[0] onto o[1] (itself)
  // and is still correct. Declaring in-place as well must check and pass both modes.
  Algorithm a = allGather2();
  a.in_place = true;
  VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_EQ(report.modes_checked, (std::vector<std::string>{"out-of-place", "in-place"}));
}

// ---- 3-rank ring allgather, in place (only the output buffer, i_chunks = 0) --------------------------
// Rank r sends to r+1 and receives from r-1. In place, its input IS o[r]. Step 0 sends o[r]; step 1
// receives chunk r-1 (what r-1 sent at step 0) into o[r-1] and forwards it; step 2 receives chunk r-2
// (forwarded by r-1 at its step 1) into o[r-2]. All three output chunks are then {(k,0)}.
Algorithm ringAllGather3InPlace() {
  Algorithm a = makeAlgorithm(CollectiveKind::kAllGather, 3, 3, true, false);
  setChunks(a, 0, 3);
  for (int r = 0; r < 3; ++r) {
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    a.ranks[r].threadblocks.push_back(tb(
        0, next, prev,
        {send(B::kOutput, r), step(O::kRecvCopySend, B::kInput, -1, B::kOutput, prev), recv(B::kOutput, (r + 1) % 3)}));
  }
  return a;
}

TEST(VerifyAllGather, RingThreeRanksInPlace) {
  VerifyReport report = verify(ringAllGather3InPlace());
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_EQ(report.modes_checked, std::vector<std::string>{"in-place"});
}

TEST(VerifyAllGather, InPlaceOnlyProgramFailsOutOfPlace) {
  // Out of place, o[r] is not the input: it starts undefined, so every output chunk of every rank ends
  // undefined; the issues carry the out-of-place mode.
  Algorithm a = ringAllGather3InPlace();
  a.out_of_place = true;
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  std::vector<std::pair<int, int>> expected;
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 3; ++k) expected.emplace_back(r, k);
  }
  EXPECT_EQ(rankChunks(report, IssueKind::kPostcondition), expected) << report.toString();
  for (const VerifyIssue& issue : report.issues) EXPECT_EQ(issue.mode, "out-of-place");
  EXPECT_EQ(report.modes_checked, (std::vector<std::string>{"out-of-place", "in-place"}));
}

TEST(VerifyAllGather, SwappedPeersDeadlock) {
  Algorithm a = ringAllGather3InPlace();
  std::swap(a.ranks[1].threadblocks[0].send_peer, a.ranks[1].threadblocks[0].recv_peer);
  // Rank 1 now sends to 0 and waits for 2; rank 2 waits for 1, which never sends to it; rank 0 gets
  // rank 2's first chunk, then waits for the second, which rank 2 (stuck) never forwards.
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kDeadlock),
            (std::vector<std::tuple<int, int, int>>{{0, 0, 2}, {1, 0, 1}, {2, 0, 1}}))
      << report.toString();
  EXPECT_NE(report.toString().find("rank 1 tb 0 step 1 (rcs): stuck: waits for data from rank 2 on channel 0"),
            std::string::npos)
      << report.toString();
  // Rank 0 sent twice to rank 1 (which now receives only from 2) and rank 1 once to rank 0 (which
  // receives only from 2): three messages nobody receives.
  EXPECT_EQ(ofKind(report, IssueKind::kPeerMismatch).size(), 3u) << report.toString();
  EXPECT_TRUE(ofKind(report, IssueKind::kPostcondition).empty());
}

// ---- 4-rank ring allreduce, in place, c = 4 ---------------------------------------------------------
// Rank r sends to r+1, receives from r-1, one threadblock, only the input buffer (aliases the output).
// Reduce-scatter: step 0 sends i[r]; at step k = 1, 2 it receives chunk r-k (the partial sum of ranks
// r-k..r-1), adds its own i[r-k] and sends on without storing (rrs); step 3 receives chunk r-3 = r+1,
// now holding ranks r+1..r-1, adds its own and stores the full sum (rrc) and step 4 sends it. Allgather:
// steps 5, 6 receive the full chunks r and r-1 (finished by r-1 at its steps 3/5) and forward them
// (rcs); step 7 receives chunk r-2 = r+2, which r+1 already holds.
Algorithm ringAllReduce4(bool fuse_rrcs = false) {
  const int n = 4;
  Algorithm a = makeAlgorithm(CollectiveKind::kAllReduce, n, n, true, false);
  setChunks(a, n, 0);
  auto mod = [&](int x) { return ((x % n) + n) % n; };
  for (int r = 0; r < n; ++r) {
    std::vector<Step> steps;
    steps.push_back(send(B::kInput, r));
    for (int k = 1; k <= n - 2; ++k) steps.push_back(step(O::kRecvReduceSend, B::kInput, mod(r - k), B::kInput, -1));
    const int last = mod(r + 1);
    if (fuse_rrcs) {
      steps.push_back(step(O::kRecvReduceCopySend, B::kInput, last, B::kInput, last));
    } else {
      steps.push_back(step(O::kRecvReduceCopy, B::kInput, last, B::kInput, last));
      steps.push_back(send(B::kInput, last));
    }
    for (int k = 0; k < n - 2; ++k) steps.push_back(step(O::kRecvCopySend, B::kInput, -1, B::kInput, mod(r - k)));
    steps.push_back(recv(B::kInput, mod(r + 2)));
    a.ranks[r].threadblocks.push_back(tb(0, mod(r + 1), mod(r - 1), std::move(steps)));
  }
  return a;
}

TEST(VerifyAllReduce, RingFourRanksWithRrcAndRrcs) {
  VerifyReport split = verify(ringAllReduce4(false));
  EXPECT_TRUE(split.ok) << split.toString();
  VerifyReport fused = verify(ringAllReduce4(true));
  EXPECT_TRUE(fused.ok) << fused.toString();
}

TEST(VerifyAllReduce, DoubleCountedReductionNamesEveryRankOfTheChunk) {
  Algorithm a = ringAllReduce4(false);
  // Rank 2 finishes chunk 3 at step 3 (rrc). Reduce its own i[3] into itself first: (2,3) twice.
  std::vector<Step>& steps = a.ranks[2].threadblocks[0].steps;
  steps.insert(steps.begin() + 3, step(O::kReduce, B::kInput, 3, B::kInput, 3));
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kPostcondition)) << report.toString();
  EXPECT_EQ(rankChunks(report, IssueKind::kPostcondition),
            (std::vector<std::pair<int, int>>{{0, 3}, {1, 3}, {2, 3}, {3, 3}}));
  EXPECT_NE(report.toString().find("rank 0 output chunk 3: expected {(0,3),(1,3),(2,3),(3,3)} got "
                                   "{(0,3),(1,3),(2,3)x2,(3,3)} ((2,3) reduced more than once)"),
            std::string::npos)
      << report.toString();
}

TEST(VerifyAllReduce, MissingSendDeadlocksTheLastReceive) {
  Algorithm a = ringAllReduce4(false);
  // Rank 0 loses its first send: rank 1 then receives one message fewer from rank 0 than it expects;
  // every message shifts by one and rank 1's final receive (step 7) waits forever.
  std::vector<Step>& steps = a.ranks[0].threadblocks[0].steps;
  steps.erase(steps.begin());
  VerifyReport report = verify(a);
  EXPECT_EQ(report.total_issues, 1) << report.toString();
  EXPECT_EQ(rankTbSteps(report, IssueKind::kDeadlock), (std::vector<std::tuple<int, int, int>>{{1, 0, 7}}));
  EXPECT_NE(report.toString().find("waits for data from rank 0 on channel 0 that never arrives"), std::string::npos);
}

TEST(VerifyAllReduce, ReceiveWithNoSendDeadlocks) {
  Algorithm a = ringAllReduce4(true);
  a.ranks[2].threadblocks[0].steps.push_back(recv(B::kInput, 0));
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kDeadlock)) << report.toString();
  const int last = static_cast<int>(a.ranks[2].threadblocks[0].steps.size()) - 1;
  EXPECT_EQ(rankTbSteps(report, IssueKind::kDeadlock), (std::vector<std::tuple<int, int, int>>{{2, 0, last}}));
}

TEST(VerifyAllReduce, OutOfPlaceModeOfAnInPlaceProgram) {
  // Out of place, the program works on the input (modifying it) and never writes the output.
  Algorithm a = ringAllReduce4(true);
  setChunks(a, 4, 4);
  a.out_of_place = true;
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  int outputs = 0, inputs = 0;
  for (const VerifyIssue& issue : ofKind(report, IssueKind::kPostcondition)) {
    EXPECT_EQ(issue.mode, "out-of-place");
    if (issue.message.find("output chunk") != std::string::npos) ++outputs;
    if (issue.message.find("must not modify its input") != std::string::npos) ++inputs;
  }
  EXPECT_EQ(outputs, 16);  // 4 ranks x 4 chunks, all undefined
  // rrc writes i[r+1], the two rcs write i[r] and i[r-1], the final r writes i[r+2]: all 4 input
  // chunks of every rank are modified.
  EXPECT_EQ(inputs, 16);
}

// ---- 3-rank alltoall with a local copy, out of place, c = 1 --------------------------------------------
// Rank r has one threadblock per peer p (send=recv=p): send i[p] (the chunk destined for p), receive p's
// chunk for r into o[p]; and threadblock 2 copies its own chunk i[r] -> o[r]. Rank r then holds
// o[s] = input chunk r of rank s = {(s, r)}, the alltoall postcondition.
Algorithm allToAll3() {
  Algorithm a = makeAlgorithm(CollectiveKind::kAllToAll, 3, 3, false, true);
  setChunks(a, 3, 3);
  for (int r = 0; r < 3; ++r) {
    int id = 0;
    for (int p = 0; p < 3; ++p) {
      if (p == r) continue;
      a.ranks[r].threadblocks.push_back(tb(id++, p, p, {send(B::kInput, p), recv(B::kOutput, p)}));
    }
    a.ranks[r].threadblocks.push_back(tb(id, -1, -1, {copy(B::kInput, r, B::kOutput, r)}));
  }
  return a;
}

TEST(VerifyAllToAll, ThreeRanksWithCopy) {
  VerifyReport report = verify(allToAll3());
  EXPECT_TRUE(report.ok) << report.toString();
}

TEST(VerifyAllToAll, OverlappingWritesByTwoThreadblocksRace) {
  Algorithm a = allToAll3();
  // Rank 1's copy threadblock writes o[2], which its threadblock for peer 2 (tb 1) also receives into.
  a.ranks[1].threadblocks[2].steps[0].dst_off = 2;
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  std::vector<VerifyIssue> races = ofKind(report, IssueKind::kRace);
  ASSERT_EQ(races.size(), 1u) << report.toString();
  EXPECT_EQ(races[0].rank, 1);
  EXPECT_EQ(races[0].chunk, 2);
  EXPECT_NE(races[0].message.find("o[2]"), std::string::npos) << races[0].message;
  // o[1] is never written.
  EXPECT_NE(report.toString().find("rank 1 output chunk 1: expected {(1,1)} got undefined"), std::string::npos);
}

TEST(VerifyAllToAll, DependencyOrdersTheSameWritesSoNoRace) {
  // Rank 0's copy tb first writes a wrong value (i[1]) into o[1]; the receive into o[1] (tb 0 step 1)
  // waits for that copy with an explicit dependency, so the receive always wins: no race, correct.
  Algorithm a = allToAll3();
  RankProgram& rank0 = a.ranks[0];
  rank0.threadblocks[2].steps.insert(rank0.threadblocks[2].steps.begin(), copy(B::kInput, 1, B::kOutput, 1));
  rank0.threadblocks[0].steps[1].deps = {Dependency{2, 0}};  // tb 0 (peer 1) receives into o[1] after it
  rank0.threadblocks[2].steps[0].has_dep = true;
  VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString();
  // Without the dependency the two writes to o[1] race.
  rank0.threadblocks[0].steps[1].deps.clear();
  VerifyReport racy = verify(a);
  EXPECT_EQ(rankChunks(racy, IssueKind::kRace), (std::vector<std::pair<int, int>>{{0, 1}})) << racy.toString();
}

// ---- ordering through messages across ranks ----------------------------------------------------------
// 2-rank allreduce, out of place, c = 1. Rank 0 tb 0 copies i[0] -> o[0] and sends o[0] to rank 1;
// rank 1 receives it, adds its i[0], stores o[0] and sends the sum back (rrcs); rank 0 tb 1 receives
// the sum into o[0]. Rank 0's two threadblocks both touch o[0], ordered only through rank 1: no race.
Algorithm allReduceThroughPeer() {
  Algorithm a = makeAlgorithm(CollectiveKind::kAllReduce, 2, 1, false, true);
  setChunks(a, 1, 1);
  a.ranks[0].threadblocks.push_back(tb(0, 1, -1, {copy(B::kInput, 0, B::kOutput, 0), send(B::kOutput, 0)}));
  a.ranks[0].threadblocks.push_back(tb(1, -1, 1, {recv(B::kOutput, 0)}));
  a.ranks[1].threadblocks.push_back(tb(0, 0, 0, {step(O::kRecvReduceCopySend, B::kInput, 0, B::kOutput, 0)}));
  return a;
}

TEST(VerifyRaces, OrderedThroughAnotherRankIsNotARace) {
  VerifyReport report = verify(allReduceThroughPeer());
  EXPECT_TRUE(report.ok) << report.toString();
}

TEST(VerifyRaces, UnorderedWhenThePeerSendsBeforeReceiving) {
  // Rank 1 now sends its own i[0] first (tb 0) and reduces what it receives separately (tb 1); rank 0
  // must reduce too. Rank 0's tb 1 writes o[0] with no path from tb 0's copy/send of o[0].
  Algorithm a = allReduceThroughPeer();
  a.ranks[0].threadblocks[1].steps[0] = step(O::kRecvReduceCopy, B::kInput, 0, B::kOutput, 0);
  a.ranks[1].threadblocks.clear();
  a.ranks[1].threadblocks.push_back(tb(0, 0, -1, {send(B::kInput, 0)}));
  a.ranks[1].threadblocks.push_back(tb(1, -1, 0, {step(O::kRecvReduceCopy, B::kInput, 0, B::kOutput, 0)}));
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kRace)) << report.toString();
  for (const VerifyIssue& race : ofKind(report, IssueKind::kRace)) {
    EXPECT_EQ(race.rank, 0);
    EXPECT_EQ(race.chunk, 0);
  }
  // Both the copy (write) and the send (read) of tb 0 conflict with tb 1's write.
  EXPECT_EQ(ofKind(report, IssueKind::kRace).size(), 2u) << report.toString();
}

// ---- two threadblocks sharing one connection -----------------------------------------------------------
// The Azure parser accepts two threadblocks of a rank on the same (peer, channel) (real msccl-tools output
// does it: realcases msccltools_allreduce_ndv2_ar1.xml, rank 3 tbs 6 and 8). Their messages then share
// one FIFO, so their order must be fixed by happens-before. Allgather n=2, c=2, out of place: rank 0 sends
// i[0] from tb 0 and i[1] from tb 1, both to rank 1 on channel 0; rank 1 receives o[0] then o[1].
Algorithm sharedConnection() {
  Algorithm a = makeAlgorithm(CollectiveKind::kAllGather, 2, 4, false, true);
  setChunks(a, 2, 4);
  a.ranks[0].threadblocks = {tb(0, 1, -1, {send(B::kInput, 0)}), tb(1, 1, -1, {send(B::kInput, 1)}),
                             tb(2, -1, 1, {recv(B::kOutput, 2), recv(B::kOutput, 3)}),
                             tb(3, -1, -1, {copy(B::kInput, 0, B::kOutput, 0, 2)})};
  a.ranks[1].threadblocks = {tb(0, 0, 0,
                                {send(B::kInput, 0), send(B::kInput, 1), recv(B::kOutput, 0), recv(B::kOutput, 1),
                                 copy(B::kInput, 0, B::kOutput, 2, 2)})};
  return a;
}

TEST(VerifyRaces, SharedConnectionNeedsOrderedSenders) {
  Algorithm a = sharedConnection();
  VerifyReport racy = verify(a);
  EXPECT_TRUE(hasKindOnly(racy, IssueKind::kRace)) << racy.toString();
  ASSERT_EQ(racy.issues.size(), 1u);
  EXPECT_EQ(racy.issues[0].rank, 0);
  EXPECT_NE(racy.issues[0].message.find("both send to rank 1 on channel 0"), std::string::npos)
      << racy.issues[0].message;
  // tb 1 sends only after tb 0 did: the FIFO order is fixed and the allgather is correct.
  a.ranks[0].threadblocks[1].steps[0].deps = {Dependency{0, 0}};
  a.ranks[0].threadblocks[0].steps[0].has_dep = true;
  VerifyReport ordered = verify(a);
  EXPECT_TRUE(ordered.ok) << ordered.toString();
  // Ordered the other way round, i[1] arrives first and lands in o[0]: wrong data, named per chunk.
  a.ranks[0].threadblocks[1].steps[0].deps.clear();
  a.ranks[0].threadblocks[0].steps[0].deps = {Dependency{1, 0}};
  VerifyReport swapped = verify(a);
  EXPECT_EQ(rankChunks(swapped, IssueKind::kPostcondition), (std::vector<std::pair<int, int>>{{1, 0}, {1, 1}}))
      << swapped.toString();
  EXPECT_TRUE(ofKind(swapped, IssueKind::kRace).empty());
}

// ---- reducescatter, 2 ranks, c = 1 --------------------------------------------------------------------
// Rank r sends i[p] (the piece p owns) to p, receives p's i[r], adds its own i[r] and stores it in o[0]:
// o[0] = {(0,r),(1,r)}, which is the reducescatter postcondition for output chunk 0 of rank r.
Algorithm reduceScatter2() {
  Algorithm a = makeAlgorithm(CollectiveKind::kReduceScatter, 2, 2, false, true);
  setChunks(a, 2, 1);
  for (int r = 0; r < 2; ++r) {
    const int p = 1 - r;
    a.ranks[r].threadblocks.push_back(
        tb(0, p, p, {send(B::kInput, p), step(O::kRecvReduceCopy, B::kInput, r, B::kOutput, 0)}));
  }
  return a;
}

TEST(VerifyReduceScatter, TwoRanksOutOfPlaceAndInPlace) {
  Algorithm a = reduceScatter2();
  a.in_place = true;  // in place, o[0] of rank r IS i[r]: the rrc reduces i[r] into itself
  VerifyReport report = verify(a);
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_EQ(report.modes_checked.size(), 2u);
}

TEST(VerifyReduceScatter, InPlaceOnlyInputProgram) {
  // Uses only the input buffer: reduces into i[r], which in place is the output chunk.
  Algorithm a = reduceScatter2();
  a.in_place = true;
  a.out_of_place = false;
  for (int r = 0; r < 2; ++r) {
    Step& rrc = a.ranks[r].threadblocks[0].steps[1];
    rrc.dst_buf = B::kInput;
    rrc.dst_off = r;
    a.ranks[r].output_chunks = 0;
  }
  EXPECT_TRUE(verify(a).ok) << verify(a).toString();
}

TEST(VerifyReduceScatter, WrongSendOffset) {
  Algorithm a = reduceScatter2();
  a.ranks[1].threadblocks[0].steps[0].src_off = 1;  // sends its own piece instead of rank 0's
  VerifyReport report = verify(a);
  EXPECT_EQ(rankChunks(report, IssueKind::kPostcondition), (std::vector<std::pair<int, int>>{{0, 0}}));
  EXPECT_NE(report.toString().find("rank 0 output chunk 0: expected {(0,0),(1,0)} got {(0,0),(1,1)}"),
            std::string::npos)
      << report.toString();
}

// ---- broadcast, 3 ranks, root 1, c = 2 ------------------------------------------------------------------
// Root 1 sends i[0..2) to rank 0 (tb 0) and to rank 2 (tb 1) and copies it to its own o[0..2) (tb 2);
// ranks 0 and 2 receive both chunks at once into o[0..2). Every o[j] is then {(1,j)}.
Algorithm broadcast3() {
  Algorithm a = makeAlgorithm(CollectiveKind::kBroadcast, 3, 2, false, true);
  a.root = 1;
  setChunks(a, 2, 2);
  a.ranks[1].threadblocks = {tb(0, 0, -1, {send(B::kInput, 0, 2)}), tb(1, 2, -1, {send(B::kInput, 0, 2)}),
                             tb(2, -1, -1, {copy(B::kInput, 0, B::kOutput, 0, 2)})};
  a.ranks[0].threadblocks = {tb(0, -1, 1, {recv(B::kOutput, 0, 2)})};
  a.ranks[2].threadblocks = {tb(0, -1, 1, {recv(B::kOutput, 0, 2)})};
  return a;
}

TEST(VerifyBroadcast, ThreeRanksRootOne) {
  VerifyReport report = verify(broadcast3());
  EXPECT_TRUE(report.ok) << report.toString();
  // The same program proves nothing for another root: rank 0 is then expected to hold {(0,j)}.
  Algorithm other = broadcast3();
  other.root = 0;
  VerifyReport wrong = verify(other);
  EXPECT_EQ(rankChunks(wrong, IssueKind::kPostcondition),
            (std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}}));
}

TEST(VerifyBroadcast, OffsetPastTheEnd) {
  Algorithm a = broadcast3();
  a.ranks[1].threadblocks[2].steps[0].dst_off = 1;  // o[1..3) of a 2-chunk output
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kOutOfRange)) << report.toString();
  ASSERT_EQ(report.issues.size(), 1u);
  EXPECT_EQ(report.issues[0].rank, 1);
  EXPECT_EQ(report.issues[0].tb, 2);
  EXPECT_EQ(report.issues[0].step, 0);
  EXPECT_EQ(report.issues[0].chunk, 1);
  EXPECT_NE(report.issues[0].message.find("dst o[1..3) is outside the output buffer (o_chunks=2)"), std::string::npos)
      << report.issues[0].message;
}

TEST(VerifyBroadcast, CountMismatchOnAConnection) {
  Algorithm a = broadcast3();
  a.ranks[0].threadblocks[0].steps[0].count = 1;  // rank 0 takes 1 chunk of the 2 sent
  VerifyReport report = verify(a);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kPeerMismatch), (std::vector<std::tuple<int, int, int>>{{0, 0, 0}}));
  EXPECT_NE(report.toString().find("receives 1 chunk(s) but the matching send, rank 1 tb 0 step 0, sent 2"),
            std::string::npos)
      << report.toString();
  EXPECT_EQ(rankChunks(report, IssueKind::kPostcondition), (std::vector<std::pair<int, int>>{{0, 1}}));
}

// ---- reduce, 3 ranks, root 0, c = 1 --------------------------------------------------------------------
// Chain 2 -> 1 -> 0: rank 2 sends i[0]; rank 1 receives it, adds i[0] and forwards (rrs); rank 0 receives,
// adds its i[0] and stores o[0] = {(0,0),(1,0),(2,0)}. Outputs of ranks 1 and 2 are unconstrained.
Algorithm reduce3() {
  Algorithm a = makeAlgorithm(CollectiveKind::kReduce, 3, 1, false, true);
  setChunks(a, 1, 1);
  a.ranks[2].threadblocks = {tb(0, 1, -1, {send(B::kInput, 0)})};
  a.ranks[1].threadblocks = {tb(0, 0, 2, {step(O::kRecvReduceSend, B::kInput, 0, B::kInput, -1)})};
  a.ranks[0].threadblocks = {tb(0, -1, 1, {step(O::kRecvReduceCopy, B::kInput, 0, B::kOutput, 0)})};
  return a;
}

TEST(VerifyReduce, ChainToRootZero) {
  VerifyReport report = verify(reduce3());
  EXPECT_TRUE(report.ok) << report.toString();
}

TEST(VerifyReduce, DependencyCycleDeadlocksWithoutHanging) {
  Algorithm a = reduce3();
  // Rank 1: tb 0 step 0 waits for tb 1 step 0, a nop that waits for tb 0 step 0.
  a.ranks[1].threadblocks[0].steps[0].deps = {Dependency{1, 0}};
  a.ranks[1].threadblocks.push_back(tb(1, -1, -1, {nop({Dependency{0, 0}})}));
  VerifyReport report = verify(a);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kDeadlock),
            (std::vector<std::tuple<int, int, int>>{{0, 0, 0}, {1, 0, 0}, {1, 1, 0}}))
      << report.toString();
  EXPECT_NE(report.toString().find("rank 1 tb 0 step 0 (rrs): stuck: waits for tb 1 step 0, which never finishes"),
            std::string::npos);
  // Rank 2's send is never received.
  EXPECT_EQ(rankTbSteps(report, IssueKind::kPeerMismatch), (std::vector<std::tuple<int, int, int>>{{2, 0, 0}}));
}

// ---- structure -----------------------------------------------------------------------------------------

VerifyReport verifyStructure(const Algorithm& a) {
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kStructure)) << report.toString();
  return report;
}

TEST(VerifyStructure, ThreadblockIdsDense) {
  Algorithm a = allToAll3();
  a.ranks[2].threadblocks[1].id = 5;
  VerifyReport report = verifyStructure(a);
  EXPECT_EQ(report.issues.at(0).rank, 2);
  EXPECT_EQ(report.issues.at(0).tb, 1);
}

TEST(VerifyStructure, PeerIsSelfOrOutOfRange) {
  Algorithm a = allToAll3();
  a.ranks[1].threadblocks[0].send_peer = 1;
  a.ranks[2].threadblocks[0].recv_peer = 3;
  VerifyReport report = verifyStructure(a);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kStructure),
            (std::vector<std::tuple<int, int, int>>{{1, 0, -1}, {2, 0, -1}}));
}

TEST(VerifyStructure, SendWithoutSendPeerAndReceiveWithoutRecvPeer) {
  Algorithm a = allGather2();
  a.ranks[0].threadblocks[0].send_peer = -1;
  a.ranks[1].threadblocks[0].recv_peer = -1;
  VerifyReport report = verifyStructure(a);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kStructure), (std::vector<std::tuple<int, int, int>>{{0, 0, 1}, {1, 0, 2}}));
}

TEST(VerifyStructure, Dependencies) {
  Algorithm a = allToAll3();
  a.ranks[0].threadblocks[0].steps[0].deps = {Dependency{7, 0}};  // no tb 7
  a.ranks[0].threadblocks[1].steps[0].deps = {Dependency{0, 4}};  // tb 0 has 2 steps
  a.ranks[1].threadblocks[0].steps[0].deps = {Dependency{0, 1}};  // own later step: deadlock
  a.ranks[1].threadblocks[0].steps[1].deps = {Dependency{0, 0}};  // own earlier step: fine
  VerifyReport report = verifyStructure(a);
  EXPECT_EQ(rankTbSteps(report, IssueKind::kStructure),
            (std::vector<std::tuple<int, int, int>>{{0, 0, 0}, {0, 1, 0}, {1, 0, 0}}));
}

TEST(VerifyStructure, CountsChannelsRankLabelsAndChunkCounts) {
  Algorithm a = allToAll3();
  a.ranks[0].threadblocks[0].steps[0].count = 0;  // a send of nothing
  a.ranks[0].threadblocks[1].channel = 1;         // nchannels = 1
  a.ranks[1].rank = 2;
  a.ranks[2].input_chunks = 2;  // alltoall n=3 c=1 has 3
  VerifyReport report = verifyStructure(a);
  EXPECT_EQ(report.total_issues, 4) << report.toString();
  // A nop with count 0 is fine.
  Algorithm b = reduce3();
  b.ranks[0].threadblocks[0].steps.push_back(nop({}));
  EXPECT_TRUE(verify(b).ok) << verify(b).toString();
}

// nchannels: 1 up to MSCCL's MAXCHANNELS, 32 (../shared/reference/taccl_msccl.md §2.3 "Limits"). The program
// itself uses channel 0 only, so the declared count alone decides.
TEST(VerifyStructure, ChannelCountUpToMscclsMaxChannels) {
  Algorithm at_limit = allGather2();
  at_limit.num_channels = 32;
  EXPECT_TRUE(verify(at_limit).ok) << verify(at_limit).toString();
  for (int channels : {33, 99999, 0}) {
    Algorithm over = allGather2();
    over.num_channels = channels;
    const VerifyReport report = verify(over);
    EXPECT_FALSE(report.ok) << channels;
    ASSERT_EQ(report.total_issues, 1) << report.toString();
    EXPECT_EQ(report.issues[0].kind, IssueKind::kStructure);
    EXPECT_EQ(report.issues[0].message,
              "nchannels must be in 1..32 (MSCCL's MAXCHANNELS), got " + std::to_string(channels));
    Result<CollectiveSpec> spec = over.spec(false);
    ASSERT_TRUE(spec.isOk());
    EXPECT_EQ(checkAlgorithmStructure(over, *spec).message(), "algorithm 'hand': " + report.issues[0].message);
  }
}

TEST(VerifyStructure, RankCountsDisagree) {
  Algorithm a = allGather2();
  a.ranks.pop_back();
  VerifyReport report = verifyStructure(a);
  EXPECT_NE(report.toString().find("lists 1 rank programs but has 2 ranks"), std::string::npos) << report.toString();
}

// checkAlgorithmStructure: verify()'s static checks as one Status, the first finding worded as verify() words it,
// prefixed by the algorithm's name. It does not replay: a deadlock passes it.
TEST(VerifyStructure, CheckAlgorithmStructureReportsTheFirstFinding) {
  const Algorithm good = allGather2();
  Result<CollectiveSpec> spec = good.spec(false);
  ASSERT_TRUE(spec.isOk());
  EXPECT_TRUE(checkAlgorithmStructure(good, *spec).isOk());
  auto message = [&](const Algorithm& a) {
    const Status status = checkAlgorithmStructure(a, *spec);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    // The same finding verify() reports first.
    const VerifyReport report = verify(a, *spec);
    EXPECT_FALSE(report.issues.empty());
    if (!report.issues.empty()) {
      EXPECT_EQ(status.message(), "algorithm 'hand': " + report.issues[0].message);
    }
    return status.message();
  };
  Algorithm bad_id = good;
  bad_id.ranks[1].threadblocks[0].id = 3;
  EXPECT_NE(message(bad_id).find("rank 1: threadblock at position 0 has id 3"), std::string::npos);
  Algorithm self_peer = good;
  self_peer.ranks[0].threadblocks[0].send_peer = 0;
  EXPECT_NE(message(self_peer).find("rank 0 tb 0: send peer is the rank itself"), std::string::npos);
  Algorithm bad_channel = good;
  bad_channel.ranks[0].threadblocks[0].channel = 2;
  EXPECT_NE(message(bad_channel).find("rank 0 tb 0: channel 2 is outside [0, nchannels=1)"), std::string::npos);
  Algorithm bad_dep = good;
  bad_dep.ranks[1].threadblocks[0].steps[2].deps = {Dependency{0, 9}};
  EXPECT_NE(message(bad_dep).find("rank 1 tb 0 step 2 (r): depends on tb 0 step 9, which does not exist"),
            std::string::npos);
  Algorithm bad_count = good;
  bad_count.ranks[0].threadblocks[0].steps[1].count = 0;
  EXPECT_NE(message(bad_count).find("rank 0 tb 0 step 1 (s): count must be >= 1, got 0"), std::string::npos);
  Algorithm out_of_range = good;
  out_of_range.ranks[1].threadblocks[0].steps[2].dst_off = 2;  // o has 2 chunks
  EXPECT_NE(message(out_of_range).find("rank 1 tb 0 step 2 (r): dst o[2..3) is outside the output buffer (o_chunks=2)"),
            std::string::npos);
  Algorithm bad_copy = good;
  bad_copy.ranks[0].precopies.push_back(PreCopy{0, 5, 1});
  EXPECT_NE(message(bad_copy).find("rank 0 copy 0: dst o[5..6)"), std::string::npos);
  // Swapped steps deadlock, which only the replay sees.
  Algorithm deadlock = good;
  for (int r = 0; r < 2; ++r) {
    std::swap(deadlock.ranks[r].threadblocks[0].steps[1], deadlock.ranks[r].threadblocks[0].steps[2]);
  }
  EXPECT_TRUE(checkAlgorithmStructure(deadlock, *spec).isOk());
  EXPECT_FALSE(verify(deadlock, *spec).ok);
}

TEST(VerifyModes, CustomIsUnverifiable) {
  Algorithm a = allGather2();
  a.collective = CollectiveKind::kCustom;
  a.collective_name = "custom";
  VerifyReport report = verify(a);
  EXPECT_FALSE(report.ok);
  ASSERT_EQ(report.issues.size(), 1u);
  EXPECT_EQ(report.issues[0].kind, IssueKind::kUnverifiable);
  EXPECT_TRUE(report.modes_checked.empty());
}

TEST(VerifyModes, IndivisibleChunkCountAndNoMode) {
  Algorithm a = allGather2();
  a.num_chunks = 3;
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kStructure)) << report.toString();
  EXPECT_NE(report.toString().find("divisible"), std::string::npos);
  Algorithm b = allGather2();
  b.out_of_place = false;
  EXPECT_TRUE(hasKindOnly(verify(b), IssueKind::kStructure));
}

TEST(VerifyModes, AllModesFalseChecksOneMode) {
  Algorithm a = allGather2();
  a.in_place = true;
  VerifyOptions options;
  options.all_modes = false;
  EXPECT_EQ(verify(a, options).modes_checked, std::vector<std::string>{"out-of-place"});
}

TEST(VerifyModes, MaxIssuesCapsRecordingButCountsAll) {
  Algorithm a = ringAllGather3InPlace();
  a.in_place = false;
  a.out_of_place = true;  // 9 undefined outputs
  VerifyOptions options;
  options.max_issues = 2;
  VerifyReport report = verify(a, options);
  EXPECT_EQ(report.issues.size(), 2u);
  EXPECT_EQ(report.total_issues, 9);
  EXPECT_NE(report.toString().find("... 7 more issue(s) not recorded"), std::string::npos);
}

TEST(VerifySpec, ExplicitSpecMustMatchRankCount) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllGather;
  spec.num_ranks = 3;
  spec.chunk_factor = 1;
  VerifyReport report = verify(allGather2(), spec);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kStructure)) << report.toString();
  spec.num_ranks = 2;
  EXPECT_TRUE(verify(allGather2(), spec).ok);
  spec.chunk_factor = 0;
  EXPECT_TRUE(hasKindOnly(verify(allGather2(), spec), IssueKind::kStructure));
}

// ---- malformed and large inputs ---------------------------------------------------------------------

TEST(VerifyRobust, HugeCountsAndBuffersDoNotCrash) {
  Algorithm a = allGather2();
  a.ranks[0].threadblocks[0].steps[1].count = INT_MAX;
  a.ranks[0].threadblocks[0].steps[1].src_off = INT_MAX;
  VerifyReport report = verify(a);
  EXPECT_TRUE(hasKindOnly(report, IssueKind::kOutOfRange)) << report.toString();
  Algorithm b = allGather2();
  b.ranks[0].scratch_chunks = INT_MAX;
  EXPECT_TRUE(hasKindOnly(verify(b), IssueKind::kStructure));
  Algorithm c = allGather2();
  c.num_chunks = INT_MAX - 1;  // divisible by 2: c huge, buffers beyond the limit
  EXPECT_FALSE(verify(c).ok);
}

TEST(VerifyRobust, NegativeOffsetOnAUsedField) {
  Algorithm a = allGather2();
  a.ranks[1].threadblocks[0].steps[0].src_off = -1;  // cpy reads src
  VerifyReport report = verify(a);
  EXPECT_EQ(rankChunks(report, IssueKind::kOutOfRange), (std::vector<std::pair<int, int>>{{1, -1}}));
}

// A 24-rank ring allreduce over 32 channels (768 threadblocks, 36k steps, c = 768) verifies in well under a
// few seconds: the verifier is linear in steps x count (plus threadblocks per clock join).
TEST(VerifyRobust, LargeRingIsFast) {
  const int n = 24, channels = 32;
  const int c = n * channels;
  Algorithm a = makeAlgorithm(CollectiveKind::kAllReduce, n, c, true, false);
  a.num_channels = channels;
  setChunks(a, c, 0);
  auto mod = [&](int x) { return ((x % n) + n) % n; };
  for (int r = 0; r < n; ++r) {
    for (int ch = 0; ch < channels; ++ch) {
      auto chunk = [&](int j) { return ch * n + mod(j); };
      std::vector<Step> steps;
      steps.push_back(send(B::kInput, chunk(r)));
      for (int k = 1; k <= n - 2; ++k)
        steps.push_back(step(O::kRecvReduceSend, B::kInput, chunk(r - k), B::kInput, -1));
      steps.push_back(step(O::kRecvReduceCopySend, B::kInput, chunk(r + 1), B::kInput, chunk(r + 1)));
      for (int k = 0; k < n - 2; ++k) steps.push_back(step(O::kRecvCopySend, B::kInput, -1, B::kInput, chunk(r - k)));
      steps.push_back(recv(B::kInput, chunk(r + 2)));
      a.ranks[r].threadblocks.push_back(tb(ch, mod(r + 1), mod(r - 1), std::move(steps), ch));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report = verify(a);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_LT(seconds, 20.0);
  // Break one channel's last step on one rank: exactly that chunk on that rank stays partial.
  a.ranks[5].threadblocks[7].steps.back().type = OpType::kNop;
  a.ranks[5].threadblocks[7].steps.back().count = 0;
  VerifyReport broken = verify(a);
  // Rank 5's channel 7 still receives the chunk from rank 4 (a leftover message) and keeps its partial value.
  EXPECT_EQ(rankChunks(broken, IssueKind::kPostcondition), (std::vector<std::pair<int, int>>{{5, 7 * n + 7}}))
      << broken.toString();
  EXPECT_EQ(rankTbSteps(broken, IssueKind::kPeerMismatch), (std::vector<std::tuple<int, int, int>>{{4, 7, 45}}));
}

}  // namespace
}  // namespace braid
