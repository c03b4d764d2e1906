// The `braid` executable: registers every subcommand and is the one place where an exception that escapes a
// command (a dependency's parse or type error, an allocation failure, a filesystem error) becomes an error line
// and exit status 1, never an abort.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

/// "topo import": the names of the subcommands that were given, outermost first; *innermost the last of them.
std::string commandName(CLI::App& app, CLI::App** innermost) {
  std::string name;
  CLI::App* at = &app;
  for (;;) {
    const std::vector<CLI::App*> given = at->get_subcommands();
    if (given.empty()) break;
    at = given.front();
    name += (name.empty() ? "" : " ") + at->get_name();
  }
  *innermost = at;
  return name;
}

/// The values of the command's options that name existing files ("a.yaml, b.xml"): the inputs an error was
/// probably reading. Empty when none does.
std::string inputsOf(const CLI::App& cmd) {
  std::string out;
  for (const CLI::Option* option : cmd.get_options()) {
    for (const std::string& value : option->results()) {
      std::error_code ec;
      if (value.empty() || value == "-" || !std::filesystem::is_regular_file(value, ec)) continue;
      out += (out.empty() ? "" : ", ") + value;
    }
  }
  return out;
}

/// Every subcommand of `app`, in the order they were added.
std::vector<CLI::App*> subcommandsOf(CLI::App& app) {
  return app.get_subcommands([](CLI::App*) { return true; });
}

/// The usage error for a command line whose command words do not name a command: "braid: error: 'frob' is not a
/// braid command: expected one of topo, verify, ..." for an unknown word (CLI11 alone would say that a subcommand is
/// required), "braid topo: error: a subcommand is required: one of import, show, draw" when none follows. Reads the
/// words up to the first option or the first command without subcommands (whose own arguments follow); nullopt
/// when they name a command. *prefix is "braid" followed by the words that did name commands.
std::optional<std::string> commandWordError(CLI::App& app, int argc, char** argv, std::string* prefix) {
  CLI::App* at = &app;
  *prefix = "braid";
  for (int i = 1;; ++i) {
    const std::vector<CLI::App*> subcommands = subcommandsOf(*at);
    if (subcommands.empty()) return std::nullopt;
    std::string names;
    for (const CLI::App* sub : subcommands) names += (names.empty() ? "" : ", ") + sub->get_name();
    if (i >= argc) return fmt::format("a subcommand is required: one of {}", names);
    const std::string word = argv[i];
    if (!word.empty() && word[0] == '-') return std::nullopt;  // --help, --version: CLI11's
    CLI::App* next = nullptr;
    for (CLI::App* sub : subcommands) {
      if (sub->check_name(word)) next = sub;
    }
    if (next == nullptr) return fmt::format("'{}' is not a {} command: expected one of {}", word, *prefix, names);
    at = next;
    *prefix += " " + word;
  }
}

int reportEscaped(CLI::App& app, const std::string& what) {
  CLI::App* cmd = &app;
  const std::string name = commandName(app, &cmd);
  const std::string inputs = inputsOf(*cmd);
  std::cerr << "braid" << (name.empty() ? "" : " " + name)
            << ": error: " << (inputs.empty() ? "" : "while reading " + inputs + ": ") << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"braid: synthesize, verify and run collective-communication algorithms"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "braid " BRAID_VERSION_STRING);  // the project version (CMakeLists.txt)
  int exit_code = 0;
  braid::cli::registerTopoCommands(app, &exit_code);
  braid::cli::registerVerifyCommand(app, &exit_code);
  braid::cli::registerAlgoCommand(app, &exit_code);
  braid::cli::registerDemoCommand(app, &exit_code);
  braid::cli::registerBoundCommand(app, &exit_code);
  braid::cli::registerSimulateCommand(app, &exit_code);
  braid::cli::registerSynthCommand(app, &exit_code);
  braid::cli::registerTuneCommand(app, &exit_code);
  // The subcommands run inside parse() (their callbacks), so this also catches what a command lets escape.
  try {
    std::string prefix;
    if (std::optional<std::string> error = commandWordError(app, argc, argv, &prefix)) {
      std::cerr << prefix << ": error: " << *error << "\nRun '" << prefix << " --help' for more information.\n";
      return 2;
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A bad command line: the command's name first, as every other error of braid <cmd> prints it.
    CLI::App* cmd = &app;
    const std::string name = commandName(app, &cmd);
    const std::string prefix = "braid" + (name.empty() ? "" : " " + name);
    std::cerr << prefix << ": error: " << e.what() << "\nRun '" << prefix << " --help' for more information.\n";
    return 2;
  } catch (const std::bad_alloc&) {
    return reportEscaped(app, "out of memory (the input asks for more than this machine can allocate)");
  } catch (const std::exception& e) {  // nlohmann, yaml-cpp, pugixml, std::filesystem, std::length_error ...
    return reportEscaped(app, e.what());
  } catch (...) {
    return reportEscaped(app, "an unknown exception");
  }
  // Output that never reached standard output (a full disk, an I/O error) fails the command whatever it returned:
  // a report cut short is not a success.
  std::cout.flush();
  if ((!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0) && exit_code == 0) {
    CLI::App* cmd = &app;
    const std::string name = commandName(app, &cmd);
    std::cerr << "braid" << (name.empty() ? "" : " " + name) << ": error: cannot write to standard output\n";
    return 1;
  }
  return exit_code;
}
