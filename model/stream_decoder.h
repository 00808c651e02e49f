// StreamDecoder: incremental detokenizer for streaming generated tokens to a client.
//
// Push returns only text that can no longer change: complete UTF-8 characters, with each invalid
// sequence already replaced by U+FFFD. Bytes of a character split across tokens wait for the rest.
// Flush ends the stream (a dangling incomplete tail becomes one U+FFFD). For any id sequence the
// concatenation of all Push results and the final Flush equals Tokenizer::Decode of the sequence,
// including the SPM leading-space rule (the first pushed token's leading space is dropped).
// One decoder per stream; not thread-safe. The Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer.h"

namespace tpserve {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The newly decidable text after appending token `id` (often "", never invalid UTF-8).
  std::string Push(int32_t id);
  // The rest of the stream; the decoder is then reset for a new stream.
  std::string Flush();

  // Bytes received but not yet emitted (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // a prefix of a UTF-8 character, still possibly valid
  bool is_first_ = true;
};

}  // namespace tpserve
