#include "common/command_line.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace tpserve {

CommandLine::CommandLine(std::string description, std::string name)
    : CLI::App(std::move(description), std::move(name)) {
  option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

std::optional<int> CommandLine::ParseOrExitCode(int argc, char** argv) {
  try {
    parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return exit(e);  // --help
    std::cerr << get_name() << ": " << e.what() << "\nRun with --help for the flags.\n";
    return 2;
  }
}

CLI::Validator Interval(double lo, double hi, bool includes_lo, bool includes_hi) {
  std::ostringstream name;
  name << (includes_lo ? "[" : "(") << lo << ", " << hi << (includes_hi ? "]" : ")");
  return CLI::Validator(
      [=, text = name.str()](std::string& value) {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        const bool is_in = (includes_lo ? v >= lo : v > lo) && (includes_hi ? v <= hi : v < hi);
        return !value.empty() && *end == '\0' && is_in ? std::string() : "must be a number in " + text;
      },
      name.str());
}

}  // namespace tpserve
