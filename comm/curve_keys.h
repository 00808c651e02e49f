// CurveZMQ key pairs and the key directory that says who may talk to a coordinator.
//
// A key directory (`tpserve keys init DIR`) holds:
//   DIR/coordinator.key          the coordinator's key pair (secret: keep it on the coordinator)
//   DIR/coordinator.pub          its public key (what clients and worker groups need)
//   DIR/clients/NAME.key|.pub    one key pair per client; the coordinator reads only the .pub files
//   DIR/workers/NAME.key|.pub    one key pair per worker group, likewise
// A .pub file is one line "public-key = <Z85>"; a .key file holds that line and "secret-key = <Z85>"
// (40 Z85 characters each, libzmq's encoding of a 32-byte Curve25519 key). Secret files are written
// mode 0600. Which files a process reads depends on its role (CurveRole below).
#pragma once

#include <string>
#include <vector>

#include "comm/zmq_transport.h"
#include "common/status.h"

namespace tpserve {

struct CurveKeyPair {
  std::string public_key;  // 40 Z85 characters
  std::string secret_key;  // 40 Z85 characters ("" when only the public key is known)
};

// A fresh key pair (zmq_curve_keypair). INTERNAL if libzmq was built without CURVE.
StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// Writes NAME.key (0600) and NAME.pub under `dir` (created if missing). ALREADY-EXISTS is
// FAILED_PRECONDITION: keys are never overwritten.
Status WriteCurveKeyPair(const std::string& dir, const std::string& name, const CurveKeyPair& pair);
// Reads PATH (a .key file: both keys; a .pub file: the public key only). DATA_LOSS when malformed.
StatusOr<CurveKeyPair> ReadCurveKeyFile(const std::string& path);
// The public keys of every DIR/*.pub file (an empty or missing directory: none).
StatusOr<std::vector<std::string>> ReadPublicKeys(const std::string& dir);

// `tpserve keys init DIR`: a coordinator key pair, one client ("default") and one worker group
// ("default"). `tpserve keys add-client DIR NAME` / add-worker: one more pair. Returns the files written.
StatusOr<std::vector<std::string>> InitKeyDirectory(const std::string& dir);
StatusOr<std::vector<std::string>> AddKeyPair(const std::string& dir, const std::string& kind, const std::string& name);

// What one process needs from a key directory.
struct CurveServerKeys {  // the coordinator
  CurveKeyPair server;
  std::vector<std::string> client_public_keys;
  std::vector<std::string> worker_public_keys;
};
struct CurveClientKeys {  // a client (kind "clients") or a worker group (kind "workers")
  std::string server_public_key;
  CurveKeyPair own;
};
StatusOr<CurveServerKeys> LoadCurveServerKeys(const std::string& dir);
// Uses DIR/<kind>/<name>.key; name "" picks the only .key file there (or "default").
StatusOr<CurveClientKeys> LoadCurveClientKeys(const std::string& dir, const std::string& kind,
                                              const std::string& name = "");

// Sets the CURVE client fields of `options` from DIR/coordinator.pub and DIR/<kind>/<name>.key
// (see LoadCurveClientKeys). keys_dir "": leaves them empty (plain TCP).
Status UseCurveClientKeys(const std::string& keys_dir, const std::string& kind, const std::string& name,
                          SocketOptions* options);

// True for endpoints no other host can reach: tcp on 127.0.0.0/8, localhost or [::1]; ipc; inproc.
// A coordinator bound elsewhere must use CURVE unless told --insecure.
bool IsLoopbackEndpoint(const std::string& endpoint);

}  // namespace tpserve
