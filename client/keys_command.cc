#include "client/keys_command.h"

#include <iostream>
#include <string>
#include <vector>

#include "comm/curve_keys.h"

namespace tpserve {

int RunKeysCommand(int argc, char** argv) {
  const std::string usage =
      "usage: tpserve keys init DIR | tpserve keys add-client DIR NAME | tpserve keys add-worker DIR NAME\n";
  const std::string verb = argc > 2 ? argv[2] : "";
  StatusOr<std::vector<std::string>> written = InvalidArgument("");
  if (verb == "init" && argc == 4) {
    written = InitKeyDirectory(argv[3]);
  } else if ((verb == "add-client" || verb == "add-worker") && argc == 5) {
    written = AddKeyPair(argv[3], verb == "add-client" ? "clients" : "workers", argv[4]);
  } else {
    std::cerr << usage;
    return verb == "--help" || verb == "-h" ? 0 : 2;
  }
  if (!written.ok()) {
    std::cerr << "tpserve keys: " << written.status().ToString() << "\n";
    return 1;
  }
  for (const std::string& file : *written) std::cout << "wrote " << file << "\n";
  if (verb == "init") {
    std::cout << "coordinator: --keys " << argv[3] << "; clients and worker groups: --keys DIR holding "
              << "coordinator.pub and their own clients/NAME.key or workers/NAME.key\n";
  }
  return 0;
}

}  // namespace tpserve
