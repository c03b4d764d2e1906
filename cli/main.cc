#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"braid: synthesize, verify and run collective-communication algorithms"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "braid 0.1.0");
  int exit_code = 0;
  braid::cli::registerTopoCommands(app, &exit_code);
  braid::cli::registerVerifyCommand(app, &exit_code);
  braid::cli::registerAlgoCommand(app, &exit_code);
  braid::cli::registerDemoCommand(app, &exit_code);
  braid::cli::registerBoundCommand(app, &exit_code);
  braid::cli::registerSimulateCommand(app, &exit_code);
  braid::cli::registerSynthCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
