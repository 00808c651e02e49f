#include "common/command_line.h"

#include <iostream>

namespace tpserve {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::cerr << app.get_name() << ": " << e.what() << "\nRun with --help for the flags.\n";
    return 2;
  }
}

}  // namespace tpserve
