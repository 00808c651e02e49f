// SseParser: an incremental reader of a Server-Sent Events stream (text/event-stream, as the HTML
// standard's "event stream interpretation" defines it), for the load generator's openai http backend.
//
// Lines end with CRLF, LF or CR, and a CR may end one Feed and its LF start the next. A line starting
// with ':' is a comment (llama-server's keep-alive ping ":\n\n"); "field: value" drops one space after
// the colon; "data" lines accumulate, joined by '\n'; "event" names the event type (default
// "message"); "id" is kept; other fields are ignored. An empty line dispatches the event, unless no
// data line came (then the block is dropped, as the standard says). Bytes may be split anywhere.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tpserve::loadgen {

struct SseEvent {
  std::string type = "message";
  std::string data;  // the data lines joined by '\n' (no trailing '\n')
  std::string id;
};

class SseParser {
 public:
  // A line or an event's data longer than this is refused (a peer cannot make us buffer without end).
  static constexpr size_t kMaxEventBytes = size_t{16} << 20;

  // Consumes `bytes` and appends every event they complete to *events. RESOURCE_EXHAUSTED when an
  // event grows past kMaxEventBytes; the parser is then unusable.
  Status Feed(std::string_view bytes, std::vector<SseEvent>* events);

 private:
  void ProcessLine(std::vector<SseEvent>* events);

  std::string line_;        // the current line, without its terminator
  bool after_cr_ = false;   // the last byte was CR: an LF next ends nothing
  bool at_start_ = true;    // a UTF-8 BOM may open the stream
  bool has_data_ = false;   // a data line came since the last dispatch
  std::string type_;        // the event type field ("" until one came)
  std::string data_;        // the data lines, each followed by '\n'
  std::string last_id_;     // persists across events, as the standard's last event ID buffer
};

}  // namespace tpserve::loadgen
