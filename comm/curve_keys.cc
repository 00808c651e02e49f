#include "comm/curve_keys.h"

#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tpserve {
namespace {

namespace fs = std::filesystem;
constexpr size_t kZ85KeyChars = 40;

bool IsZ85Key(const std::string& k) {
  uint8_t raw[32];
  return k.size() == kZ85KeyChars && zmq_z85_decode(raw, k.c_str()) != nullptr;
}

Status WriteFile(const fs::path& path, const std::string& text, bool secret) {
  std::error_code ec;
  if (fs::exists(path, ec)) return FailedPrecondition(path.string() + " exists; keys are never overwritten");
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Unavailable("cannot write " + path.string());
  if (secret) ::chmod(path.c_str(), 0600);  // before the secret goes in
  out << text;
  out.close();
  if (!out) return Unavailable("cannot write " + path.string());
  return OkStatus();
}

}  // namespace

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  char pub[kZ85KeyChars + 1], sec[kZ85KeyChars + 1];
  if (zmq_curve_keypair(pub, sec) != 0) return Internal("zmq_curve_keypair failed: libzmq lacks CURVE (libsodium)");
  return CurveKeyPair{pub, sec};
}

Status WriteCurveKeyPair(const std::string& dir, const std::string& name, const CurveKeyPair& pair) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create " + dir + ": " + ec.message());
  const std::string pub_line = "public-key = " + pair.public_key + "\n";
  RETURN_IF_ERROR(WriteFile(fs::path(dir) / (name + ".pub"), pub_line, /*secret=*/false));
  return WriteFile(fs::path(dir) / (name + ".key"), pub_line + "secret-key = " + pair.secret_key + "\n",
                   /*secret=*/true);
}

StatusOr<CurveKeyPair> ReadCurveKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("no key file " + path);
  CurveKeyPair pair;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string field, eq, value;
    if (!(words >> field)) continue;
    if (!(words >> eq >> value) || eq != "=" || !IsZ85Key(value)) {
      return DataLoss(path + ": expected 'public-key = <40 Z85 chars>' or 'secret-key = ...', got '" + line + "'");
    }
    if (field == "public-key") {
      pair.public_key = value;
    } else if (field == "secret-key") {
      pair.secret_key = value;
    } else {
      return DataLoss(path + ": unknown field " + field);
    }
  }
  if (pair.public_key.empty()) return DataLoss(path + ": no public-key line");
  return pair;
}

StatusOr<std::vector<std::string>> ReadPublicKeys(const std::string& dir) {
  std::vector<std::string> keys;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return keys;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".pub") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    ASSIGN_OR_RETURN(CurveKeyPair pair, ReadCurveKeyFile(f.string()));
    keys.push_back(pair.public_key);
  }
  return keys;
}

StatusOr<std::vector<std::string>> AddKeyPair(const std::string& dir, const std::string& kind, const std::string& name) {
  if (kind != "clients" && kind != "workers") return InvalidArgument("key kind must be clients or workers, not " + kind);
  if (name.empty() || name.find_first_of("/.") != std::string::npos) {
    return InvalidArgument("a key name is a plain file name (no '/' or '.'): '" + name + "'");
  }
  ASSIGN_OR_RETURN(CurveKeyPair pair, GenerateCurveKeyPair());
  const std::string sub = (fs::path(dir) / kind).string();
  RETURN_IF_ERROR(WriteCurveKeyPair(sub, name, pair));
  return std::vector<std::string>{sub + "/" + name + ".pub", sub + "/" + name + ".key"};
}

StatusOr<std::vector<std::string>> InitKeyDirectory(const std::string& dir) {
  ASSIGN_OR_RETURN(CurveKeyPair coordinator, GenerateCurveKeyPair());
  RETURN_IF_ERROR(WriteCurveKeyPair(dir, "coordinator", coordinator));
  std::vector<std::string> written = {dir + "/coordinator.pub", dir + "/coordinator.key"};
  for (const char* kind : {"clients", "workers"}) {
    ASSIGN_OR_RETURN(std::vector<std::string> files, AddKeyPair(dir, kind, "default"));
    written.insert(written.end(), files.begin(), files.end());
  }
  return written;
}

StatusOr<CurveServerKeys> LoadCurveServerKeys(const std::string& dir) {
  CurveServerKeys keys;
  ASSIGN_OR_RETURN(keys.server, ReadCurveKeyFile(dir + "/coordinator.key"));
  if (keys.server.secret_key.empty()) return DataLoss(dir + "/coordinator.key: no secret-key line");
  ASSIGN_OR_RETURN(keys.client_public_keys, ReadPublicKeys(dir + "/clients"));
  ASSIGN_OR_RETURN(keys.worker_public_keys, ReadPublicKeys(dir + "/workers"));
  return keys;
}

StatusOr<CurveClientKeys> LoadCurveClientKeys(const std::string& dir, const std::string& kind, const std::string& name) {
  CurveClientKeys keys;
  ASSIGN_OR_RETURN(CurveKeyPair server, ReadCurveKeyFile(dir + "/coordinator.pub"));
  keys.server_public_key = server.public_key;
  std::string file = name;
  if (file.empty()) {
    std::vector<std::string> candidates;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(dir) / kind, ec)) {
      if (entry.path().extension() == ".key") candidates.push_back(entry.path().stem().string());
    }
    if (candidates.size() == 1) {
      file = candidates[0];
    } else if (std::count(candidates.begin(), candidates.end(), "default") == 1) {
      file = "default";
    } else {
      return NotFound(dir + "/" + kind + ": " + std::to_string(candidates.size()) +
                      " key pairs and none named default; say which (--key-name)");
    }
  }
  ASSIGN_OR_RETURN(keys.own, ReadCurveKeyFile(dir + "/" + kind + "/" + file + ".key"));
  if (keys.own.secret_key.empty()) return DataLoss(dir + "/" + kind + "/" + file + ".key: no secret-key line");
  return keys;
}

Status UseCurveClientKeys(const std::string& keys_dir, const std::string& kind, const std::string& name,
                          SocketOptions* options) {
  if (keys_dir.empty()) return OkStatus();
  ASSIGN_OR_RETURN(CurveClientKeys keys, LoadCurveClientKeys(keys_dir, kind, name));
  options->curve_server_key = keys.server_public_key;
  options->curve_public_key = keys.own.public_key;
  options->curve_secret_key = keys.own.secret_key;
  return OkStatus();
}

bool IsLoopbackEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string rest = endpoint.substr(6);
  return rest.rfind("127.", 0) == 0 || rest.rfind("localhost:", 0) == 0 || rest.rfind("[::1]:", 0) == 0;
}

}  // namespace tpserve
