// CommandLine: the command line of every tpserve program, parsed by CLI11 (Debian libcli11-dev).
// Each program declares its flags on one (with their help text, defaults and ranges), so `--help`
// works everywhere and a bad command line behaves the same everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace tpserve {

class CommandLine : public CLI::App {
 public:
  // A flag given twice takes its last value (scripts append overrides to default command lines);
  // subcommands inherit this.
  CommandLine(std::string description, std::string name);

  // Parses argv into the options declared here (and on subcommands). nullopt: go on and run.
  // Otherwise the exit code to return at once: 0 after --help (the usage went to stdout), 2 after
  // a bad command line (the error and a pointer to --help went to stderr).
  std::optional<int> ParseOrExitCode(int argc, char** argv);
};

// A check that a number lies between lo and hi, each end included or not: Interval(0, 1, false, true)
// is (0, 1]. (CLI::Range includes both ends.)
CLI::Validator Interval(double lo, double hi, bool includes_lo, bool includes_hi);

}  // namespace tpserve
