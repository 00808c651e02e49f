#include "client/keys_command.h"

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "comm/curve_keys.h"
#include "common/command_line.h"

namespace tpserve {

int RunKeysCommand(int argc, char** argv) {
  CommandLine app("tpserve keys: the CurveZMQ key directory of a coordinator, its clients and its worker groups.",
                  "tpserve keys");
  app.require_subcommand(1);
  std::string dir, name;
  CLI::App* init = app.add_subcommand("init", "coordinator pair, one client and one worker pair (\"default\")");
  init->add_option("DIR", dir, "the key directory")->required();
  CLI::App* add_client = app.add_subcommand("add-client", "one more client pair (give NAME.key to that client)");
  CLI::App* add_worker = app.add_subcommand("add-worker", "one more worker-group pair");
  for (CLI::App* add : {add_client, add_worker}) {
    add->add_option("DIR", dir, "the key directory")->required();
    add->add_option("NAME", name, "the pair's name")->required();
  }
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc - 1, argv + 1)) return *exit_code;  // argv[1]: keys
  StatusOr<std::vector<std::string>> written =
      init->parsed() ? InitKeyDirectory(dir) : AddKeyPair(dir, add_client->parsed() ? "clients" : "workers", name);
  if (!written.ok()) {
    std::cerr << "tpserve keys: " << written.status().ToString() << "\n";
    return 1;
  }
  for (const std::string& file : *written) std::cout << "wrote " << file << "\n";
  if (init->parsed()) {
    std::cout << "coordinator: --keys " << dir << "; clients and worker groups: --keys DIR holding "
              << "coordinator.pub and their own clients/NAME.key or workers/NAME.key\n";
  }
  return 0;
}

}  // namespace tpserve
