// braid_perf's flags: nccl-tests' short and long forms, defaults, the collective from argv[0] or argv[1], and
// clear errors for bad input.
#include "braid_perf/options.h"

#include <gtest/gtest.h>

namespace braid::perf {
namespace {

Options parseOk(const std::vector<std::string>& argv) {
  Result<Options> options = parseOptions(argv);
  EXPECT_TRUE(options.isOk()) << options.status().toString();
  return options.isOk() ? options.value() : Options{};
}

std::string parseError(const std::vector<std::string>& argv) {
  Result<Options> options = parseOptions(argv);
  EXPECT_FALSE(options.isOk());
  if (options.isOk()) return "";
  EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
  return options.status().message();
}

TEST(PerfOptionsTest, DefaultsAreNcclTests) {
  const Options o = parseOk({"/usr/bin/all_reduce_perf"});
  EXPECT_EQ(o.collective, Collective::kAllReduce);
  EXPECT_EQ(o.program, "all_reduce_perf");
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.processes, 1);
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.average, 1);
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0], DataType::kFloat32);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], ReduceOp::kSum);
  EXPECT_EQ(o.root, 0);
}

TEST(PerfOptionsTest, CollectiveFromSymlinkOrFirstArgument) {
  EXPECT_EQ(parseOk({"all_gather_perf"}).collective, Collective::kAllGather);
  EXPECT_EQ(parseOk({"./bin/reduce_scatter_perf"}).collective, Collective::kReduceScatter);
  EXPECT_EQ(parseOk({"alltoall_perf"}).collective, Collective::kAllToAll);
  EXPECT_EQ(parseOk({"broadcast_perf"}).collective, Collective::kBroadcast);
  EXPECT_EQ(parseOk({"reduce_perf"}).collective, Collective::kReduce);
  const Options o = parseOk({"build/bin/braid_perf", "all_reduce", "-t", "3"});
  EXPECT_EQ(o.collective, Collective::kAllReduce);
  EXPECT_EQ(o.program, "braid_perf all_reduce");
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(parseOk({"braid_perf", "allgather"}).collective, Collective::kAllGather);
  EXPECT_EQ(parseOk({"braid_perf", "alltoall_perf"}).collective, Collective::kAllToAll);
  EXPECT_NE(parseError({"braid_perf", "gather"}).find("unknown collective 'gather'"), std::string::npos);
  EXPECT_NE(parseError({"braid_perf", "-b", "8"}).find("name the collective first"), std::string::npos);
  EXPECT_TRUE(parseOk({"braid_perf", "-h"}).help);
}

// "# Collective test starting: <name>" names nccl-tests' binary of the collective, however it was started.
TEST(PerfOptionsTest, TestNameIsTheNcclTestsBinary) {
  EXPECT_EQ(testName(Collective::kAllReduce), "all_reduce_perf");
  EXPECT_EQ(testName(Collective::kAllGather), "all_gather_perf");
  EXPECT_EQ(testName(Collective::kReduceScatter), "reduce_scatter_perf");
  EXPECT_EQ(testName(Collective::kAllToAll), "alltoall_perf");
  EXPECT_EQ(testName(Collective::kBroadcast), "broadcast_perf");
  EXPECT_EQ(testName(Collective::kReduce), "reduce_perf");
  EXPECT_EQ(testName(parseOk({"braid_perf", "all2all"}).collective), "alltoall_perf");
  EXPECT_EQ(testName(parseOk({"braid_perf", "bcast"}).collective), "broadcast_perf");
  EXPECT_EQ(testName(parseOk({"./ALLREDUCE_perf"}).collective), "all_reduce_perf");
}

TEST(PerfOptionsTest, ShortAndLongFormsAgree) {
  const Options s = parseOk({"all_reduce_perf",
                             "-b",
                             "8",
                             "-e",
                             "1M",
                             "-f",
                             "4",
                             "-t",
                             "3",
                             "-n",
                             "5",
                             "-w",
                             "2",
                             "-c",
                             "0",
                             "-z",
                             "1",
                             "-a",
                             "3",
                             "-T",
                             "9",
                             "-N",
                             "2",
                             "-m",
                             "3",
                             "-g",
                             "1",
                             "-p",
                             "2",
                             "-r",
                             "1",
                             "-J",
                             "out.json",
                             "-d",
                             "half",
                             "-o",
                             "max"});
  const Options l = parseOk({"all_reduce_perf",
                             "--minbytes",
                             "8",
                             "--maxbytes=1M",
                             "--stepfactor",
                             "4",
                             "--nthreads=3",
                             "--iters",
                             "5",
                             "--warmup_iters",
                             "2",
                             "--check",
                             "0",
                             "--blocking",
                             "1",
                             "--average",
                             "3",
                             "--timeout",
                             "9",
                             "--run_cycles",
                             "2",
                             "--agg_iters",
                             "3",
                             "--ngpus",
                             "1",
                             "--nprocs",
                             "2",
                             "--root",
                             "1",
                             "--output_file",
                             "out.json",
                             "--datatype",
                             "half",
                             "--op",
                             "max"});
  for (const Options* o : {&s, &l}) {
    EXPECT_EQ(o->min_bytes, 8u);
    EXPECT_EQ(o->max_bytes, 1u << 20);
    EXPECT_EQ(o->step_factor, 4u);
    EXPECT_EQ(o->threads, 3);
    EXPECT_EQ(o->iters, 5);
    EXPECT_EQ(o->warmup_iters, 2);
    EXPECT_EQ(o->check, 0);
    EXPECT_EQ(o->blocking, 1);
    EXPECT_EQ(o->average, 3);
    EXPECT_EQ(o->timeout_s, 9);
    EXPECT_EQ(o->run_cycles, 2);
    EXPECT_EQ(o->agg_iters, 3);
    EXPECT_EQ(o->processes, 2);
    EXPECT_EQ(o->ranks(), 6);
    EXPECT_EQ(o->root, 1);
    EXPECT_EQ(o->json_file, "out.json");
    ASSERT_EQ(o->types.size(), 1u);
    EXPECT_EQ(o->types[0], DataType::kFloat16);
    ASSERT_EQ(o->ops.size(), 1u);
    EXPECT_EQ(o->ops[0], ReduceOp::kMax);
  }
  // Attached values.
  const Options a = parseOk({"all_reduce_perf", "-b8", "-e64K", "-t2"});
  EXPECT_EQ(a.min_bytes, 8u);
  EXPECT_EQ(a.max_bytes, 64u << 10);
  EXPECT_EQ(a.threads, 2);
}

TEST(PerfOptionsTest, AllTypesAllOpsAllRoots) {
  const Options o = parseOk({"reduce_perf", "-d", "all", "-o", "all", "-r", "all", "-t", "2"});
  EXPECT_TRUE(o.all_types);
  ASSERT_EQ(o.types.size(), 10u);
  // nccl-tests' order: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
  const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  for (size_t i = 0; i < 10; ++i) EXPECT_STREQ(dataTypeName(o.types[i]), names[i]);
  ASSERT_EQ(o.ops.size(), 5u);
  EXPECT_EQ(o.ops[4], ReduceOp::kAvg);
  EXPECT_EQ(o.root, -1);
  EXPECT_EQ(parseTypeName("BF16"), DataType::kBfloat16);
  EXPECT_EQ(parseTypeName("fp32"), DataType::kFloat32);
  EXPECT_EQ(parseTypeName("int"), DataType::kInt32);
  EXPECT_FALSE(parseTypeName("f8e4m3").has_value());
  // NCCL's enum spellings are not -d / -o names.
  EXPECT_FALSE(parseTypeName("ncclFloat32").has_value());
  EXPECT_FALSE(parseOpName("ncclSum").has_value());
  EXPECT_EQ(parseOpName("AVG"), ReduceOp::kAvg);
  EXPECT_FALSE(parseOpName("mulsum").has_value());
}

TEST(PerfOptionsTest, BadInputNamesTheFlag) {
  EXPECT_EQ(parseError({"all_reduce_perf", "--bogus"}), "unknown option --bogus");
  EXPECT_EQ(parseError({"all_reduce_perf", "-q", "1"}), "unknown option -q");
  EXPECT_EQ(parseError({"all_reduce_perf", "-n", "abc"}), "-n abc: not an integer");
  EXPECT_EQ(parseError({"all_reduce_perf", "-n"}), "-n needs a value");
  EXPECT_EQ(parseError({"all_reduce_perf", "-n", "0"}), "-n 0: must be in [1, 2147483647]");
  EXPECT_NE(parseError({"all_reduce_perf", "-g", "2"}).find("-g must be 1"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "-b", "1X"}).find("-b 1X: not a size"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "-b", "2M", "-e", "1M"}).find("above -e"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "-d", "f8e4m3"}).find("unknown type"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "-o", "mulsum"}).find("pre-multiplied"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "--transport", "rdma"}).find("unknown transport"), std::string::npos);
  EXPECT_EQ(parseError({"all_reduce_perf", "-p", "3", "--transport", "threads"}),
            "-p 3 with --transport threads: the threads transport connects ranks within one process; use shm, tcp, "
            "ucx or auto with -p, or -t alone with threads");
  EXPECT_EQ(parseOk({"all_reduce_perf", "-p", "1", "-t", "3", "--transport", "threads"}).ranks(), 3);
  EXPECT_EQ(parseOk({"all_reduce_perf", "-p", "3", "--transport", "shm"}).ranks(), 3);
  EXPECT_NE(parseError({"all_reduce_perf", "--algo", "/nonexistent/x.xml"}).find("no such file"), std::string::npos);
  EXPECT_NE(parseError({"broadcast_perf", "-t", "2", "-r", "2"}).find("below the rank count 2"), std::string::npos);
  EXPECT_EQ(parseOk({"all_reduce_perf", "-t", "2", "-r", "2"}).root, 2);  // ignored without a root, as nccl-tests
  EXPECT_NE(parseError({"all_reduce_perf", "-a", "4"}).find("-a 4"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "extra"}).find("unexpected argument 'extra'"), std::string::npos);
  EXPECT_NE(parseError({"all_reduce_perf", "--help=1"}).find("takes no value"), std::string::npos);
}

TEST(PerfOptionsTest, SweepSizesFollowNcclTestsLoop) {
  Options o;
  o.min_bytes = 8;
  o.max_bytes = 1 << 20;
  o.step_factor = 4;
  // 8, 32, ..., 8 x 4^k <= 1M: k = 0..8 (8 x 4^8 = 524288; 8 x 4^9 = 2097152 > 1M).
  std::vector<uint64_t> want;
  for (uint64_t s = 8; s <= (1u << 20); s *= 4) want.push_back(s);
  EXPECT_EQ(sweepSizes(o), want);
  EXPECT_EQ(want.size(), 9u);
  o.step_factor = 1;
  o.min_bytes = 100;
  o.max_bytes = 400;
  o.step_bytes = 150;
  EXPECT_EQ(sweepSizes(o), (std::vector<uint64_t>{100, 250, 400}));
  o.min_bytes = o.max_bytes = 0;
  o.step_factor = 2;
  EXPECT_EQ(sweepSizes(o), (std::vector<uint64_t>{0}));
  o.max_bytes = 4;
  EXPECT_EQ(sweepSizes(o), (std::vector<uint64_t>{0, 1, 2, 4}));
}

TEST(PerfOptionsTest, HelpNamesEveryFlagAndTheProcessDifference) {
  const std::string help = helpText("all_reduce_perf");
  for (const char* flag : {"-t,", "-p,", "-g,", "-b,", "-e,", "-i,", "-f,", "-n,", "-w,",    "-m,",         "-N,",
                           "-c,", "-d,", "-o,", "-r,", "-z,", "-a,", "-T,", "-J,", "--algo", "--transport", "-h,"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(help.find("parallel_init"), std::string::npos);
}

}  // namespace
}  // namespace braid::perf
