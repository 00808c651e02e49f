#include "tests/fuzz/fuzz_input.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tpserve::fuzz {

const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::exists("/dev/shm", ec) ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("tpserve-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    // The directory goes with the process, whichever way libFuzzer ends it.
    static const std::string to_remove = d.string();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(to_remove, ignored);
    });
    return d.string();
  }();
  return dir;
}

std::string WriteScratchFile(const std::string& name, std::string_view bytes) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

void SplitInput(std::string_view input, char separator, std::string_view* head, std::string_view* tail) {
  const size_t at = input.find(separator);
  *head = input.substr(0, at);
  *tail = at == std::string_view::npos ? std::string_view() : input.substr(at + 1);
}

}  // namespace tpserve::fuzz
