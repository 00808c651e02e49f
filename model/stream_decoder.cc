#include "model/stream_decoder.h"

#include "model/unicode.h"

namespace tpserve {

std::string StreamDecoder::Push(int32_t id) {
  std::string bytes = tokenizer_.TokenText(id);
  if (is_first_ && tokenizer_.strips_leading_space() && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  is_first_ = false;
  pending_ += bytes;
  std::string out;
  const size_t consumed = unicode::AppendSanitizedUtf8(pending_, /*at_end=*/false, &out);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  unicode::AppendSanitizedUtf8(pending_, /*at_end=*/true, &out);
  pending_.clear();
  is_first_ = true;
  return out;
}

}  // namespace tpserve
