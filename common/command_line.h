// The command line of every tpserve program, parsed by CLI11 (Debian libcli11-dev): each program
// declares its flags on a CLI::App (with their help text, defaults and ranges) and calls this once,
// so `--help` works everywhere and a bad command line behaves the same everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace tpserve {

// Parses argv into the options declared on `app` (and its subcommands). nullopt: go on and run.
// Otherwise the exit code to return at once: 0 after --help (the usage went to stdout), 2 after a
// bad command line (the error and a pointer to --help went to stderr).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace tpserve
