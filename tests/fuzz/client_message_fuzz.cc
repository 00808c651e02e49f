// The client protocol decoders (coordinator side: ClientMessage; client side: ServerMessage) on
// arbitrary bytes: never a crash, and whatever decodes re-encodes to a fixed point.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm/client_codec.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (auto m = proto::DecodeClientMessage(data, size); m.ok()) {
    const std::string once = proto::EncodeClientMessage(*m);
    auto again = proto::DecodeClientMessage(once.data(), once.size());
    if (!again.ok() || proto::EncodeClientMessage(*again) != once) std::abort();
  }
  if (auto m = proto::DecodeServerMessage(data, size); m.ok()) {
    const std::string once = proto::EncodeServerMessage(*m);
    auto again = proto::DecodeServerMessage(once.data(), once.size());
    if (!again.ok() || proto::EncodeServerMessage(*again) != once) std::abort();
  }
  return 0;
}
