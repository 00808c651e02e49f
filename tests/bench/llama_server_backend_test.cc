// LlamaServerBackend against a scripted fake llama-server on a loopback socket (a thread that answers
// each connection with canned bytes, written in small pieces): server info, a streamed completion
// counted by tokens_predicted, an HTTP error, an error event, and a stream cut before its end.
#include "bench/loadgen/llama_server_backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tpserve::loadgen {
namespace {

std::string Chunked(const std::vector<std::string>& chunks, bool terminate) {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (const std::string& c : chunks) {
    std::snprintf(size, sizeof(size), "%zx\r\n", c.size());
    out += size + c + "\r\n";
  }
  return terminate ? out + "0\r\n\r\n" : out;
}

// Answers GET /health and GET /v1/models itself and the i-th POST with completions[i]; one
// connection at a time, in arrival order, each reply written 5 bytes per send, then closed.
class FakeLlamaServer {
 public:
  explicit FakeLlamaServer(std::vector<std::string> completions) : completions_(std::move(completions)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeLlamaServer() {
    shutdown(listen_fd_, SHUT_RDWR);  // unblocks accept
    thread_.join();
    close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> bodies() {  // the POST bodies received so far
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  void Serve() {
    size_t next = 0;
    while (true) {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::string request;
      char buf[4096];
      size_t head_end = std::string::npos, length = 0;
      while (head_end == std::string::npos || request.size() < head_end + 4 + length) {
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
        if (head_end == std::string::npos && (head_end = request.find("\r\n\r\n")) != std::string::npos) {
          const size_t cl = request.find("Content-Length: ");
          length = cl < head_end ? std::stoul(request.substr(cl + 16)) : 0;
        }
      }
      std::string reply;
      if (request.rfind("GET /health ", 0) == 0) {
        reply = "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}";
      } else if (request.rfind("GET /v1/models ", 0) == 0) {
        const std::string body = R"({"object":"list","data":[{"id":"smol.gguf","meta":{"n_vocab":49152,"n_ctx":8192}}]})";
        reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      } else if (request.rfind("POST /completion ", 0) == 0 && next < completions_.size()) {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(request.substr(head_end + 4));
        reply = completions_[next++];
      } else {
        reply = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      }
      for (size_t at = 0; at < reply.size(); at += 5) {
        if (send(fd, reply.data() + at, std::min<size_t>(5, reply.size() - at), MSG_NOSIGNAL) < 0) break;
      }
      close(fd);
    }
  }

  std::vector<std::string> completions_;
  std::mutex mu_;
  std::vector<std::string> bodies_;  // GUARDED_BY(mu_)
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// Receives until the request's last event (finish or error); every event must be of that request.
std::vector<BackendEvent> Drain(LoadBackend* backend, uint64_t id) {
  std::vector<BackendEvent> events;
  while (events.empty() || events.back().kind == BackendEvent::Kind::kTokens) {
    StatusOr<BackendEvent> e = backend->Receive(std::chrono::milliseconds(10000));
    if (!e.ok()) {
      ADD_FAILURE() << e.status().ToString();
      break;
    }
    EXPECT_EQ(e->request_id, id);
    events.push_back(*e);
  }
  return events;
}

TEST(LlamaServerBackendTest, InfoStreamAndFailures) {
  const std::string partial1 = "data: {\"content\":\"a\",\"tokens\":[5],\"stop\":false,\"tokens_predicted\":1}\n\n";
  const std::string partial2 = "data: {\"content\":\"b\",\"tokens\":[6],\"stop\":false,\"tokens_predicted\":2}\n\n";
  const std::string partial4 = "data: {\"content\":\"\xC3\xA9\",\"tokens\":[8],\"stop\":false,\"tokens_predicted\":4}\n\n";
  const std::string final4 =
      "data: {\"content\":\"\",\"tokens\":[],\"stop\":true,\"tokens_predicted\":4,\"timings\":{\"cache_n\":5,\"predicted_n\":4}}\n\n";
  FakeLlamaServer server({
      Chunked({partial1, ":\n\n" + partial2, partial4 + final4}, true),
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 26\r\n\r\n{\"error\":\"loading model\"}\n",
      Chunked({partial1, "data: {\"error\":{\"code\":500,\"message\":\"decode failed\"}}\n\n"}, true),
      Chunked({partial1}, true),   // the body ends without a final event
      Chunked({partial1}, false),  // the connection closes inside the body
  });
  auto backend = LlamaServerBackend::Create(server.url());
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto info = (*backend)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->model_name, "smol.gguf");
  EXPECT_EQ(info->vocab_size, 49152);
  EXPECT_EQ(info->context_length, 8192);

  BenchRequest request{{40, 41, 42}, 4};
  auto id = (*backend)->Start(request);
  ASSERT_TRUE(id.ok());
  std::vector<BackendEvent> events = Drain(backend->get(), *id);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].num_tokens, 1);
  EXPECT_EQ(events[1].num_tokens, 1);
  EXPECT_EQ(events[2].num_tokens, 2);  // a token held back in a UTF-8 character came with the next
  EXPECT_EQ(events[3].kind, BackendEvent::Kind::kFinish);
  EXPECT_EQ(events[3].reported_output_tokens, 4);
  EXPECT_EQ(events[3].cached_prompt_tokens, 5);

  for (const char* expected : {"HTTP 503", "decode failed", "ended before its final event", "closed inside the body"}) {
    id = (*backend)->Start(request);
    ASSERT_TRUE(id.ok());
    events = Drain(backend->get(), *id);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().kind, BackendEvent::Kind::kError);
    EXPECT_NE(events.back().error.find(expected), std::string::npos) << events.back().error;
  }
  EXPECT_EQ((*backend)->Receive(std::chrono::milliseconds(1)).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*backend)->SampleKv().status().code(), StatusCode::kUnimplemented);
  backend->reset();
  const std::vector<std::string> bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 5u);
  EXPECT_NE(bodies[0].find("\"prompt\":[40,41,42]"), std::string::npos) << bodies[0];
  EXPECT_FALSE(LlamaServerBackend::Create("http://example.com:80").ok());  // not an IPv4 address
  EXPECT_FALSE(LlamaServerBackend::Create("tcp://127.0.0.1:80").ok());
}

}  // namespace
}  // namespace tpserve::loadgen
