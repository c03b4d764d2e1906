// The `braid` CLI: one file per subcommand group; each registers its subcommands on the app.
// A subcommand's callback stores its exit status in *exit_code (0 success, 1 failure such as a
// failed verification or bad input, 2 usage error) and prints errors to stderr.
#pragma once

#include <CLI/CLI.hpp>

namespace braid::cli {

void registerTopoCommands(CLI::App& app, int* exit_code);     // topo_cmd.cc: braid topo import|show|draw
void registerVerifyCommand(CLI::App& app, int* exit_code);    // verify_cmd.cc: braid verify
void registerAlgoCommand(CLI::App& app, int* exit_code);      // algo_cmd.cc: braid algo
void registerDemoCommand(CLI::App& app, int* exit_code);      // demo_cmd.cc: braid demo (the README's main job)
void registerBoundCommand(CLI::App& app, int* exit_code);     // bound_cmd.cc: braid bound
void registerSimulateCommand(CLI::App& app, int* exit_code);  // simulate_cmd.cc: braid simulate
void registerSynthCommand(CLI::App& app, int* exit_code);     // synth_cmd.cc: braid synth
void registerTuneCommand(CLI::App& app, int* exit_code);      // tune_cmd.cc: braid tune (the NCCL tuner's table)

}  // namespace braid::cli
