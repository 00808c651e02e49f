// OpenAiHttpBackend against a scripted fake OpenAI server on a loopback socket (a thread that answers
// each connection with canned bytes, written in small pieces): server info as llama-server and as
// tpserve's gateway report it, a streamed completion counted by chunks and corrected by its usage,
// an HTTP error, an error event, and streams cut before [DONE].
#include "bench/loadgen/openai_http_backend.h"

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

std::string Ok(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Answers GET /health, GET /v1/models (`models`, the body) and POST /tokenize itself and the i-th
// POST /v1/completions with completions[i]; one connection at a time, in arrival order, each reply
// written 5 bytes per send, then closed.
class FakeOpenAiServer {
 public:
  FakeOpenAiServer(std::string models, std::vector<std::string> completions)
      : models_(std::move(models)), completions_(std::move(completions)) {
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
  ~FakeOpenAiServer() {
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
        reply = Ok(R"({"status":"ok"})");
      } else if (request.rfind("GET /v1/models ", 0) == 0) {
        reply = Ok(models_);
      } else if (request.rfind("POST /tokenize ", 0) == 0) {
        reply = Ok(R"({"count":1,"max_model_len":2048,"tokens":[64]})");
      } else if (request.rfind("POST /v1/completions ", 0) == 0 && next < completions_.size()) {
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

  std::string models_;
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

std::string Chunk(const std::string& text) {
  return "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"" + text +
         "\",\"finish_reason\":null}]}\n\n";
}

const char kLlamaModels[] = R"({"object":"list","data":[{"id":"smol.gguf","meta":{"n_vocab":49152,"n_ctx":8192}}]})";

TEST(OpenAiHttpBackendTest, InfoStreamAndFailures) {
  const std::string usage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
      "\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n";
  FakeOpenAiServer server(kLlamaModels, {
      // 4 tokens: the 3rd held back inside a UTF-8 character (an empty chunk), so 3 chunks count.
      Chunked({Chunk("a"), ": ping\n\n" + Chunk("b"), Chunk("") + Chunk("\xC3\xA9"), usage + "data: [DONE]\n\n"}, true),
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 26\r\n\r\n{\"error\":\"loading model\"}\n",
      Chunked({Chunk("a"), "data: {\"error\":{\"code\":500,\"message\":\"decode failed\"}}\n\n"}, true),
      Chunked({Chunk("a"), usage}, true),  // the body ends without [DONE]
      Chunked({Chunk("a")}, false),        // the connection closes inside the body
  });
  auto backend = OpenAiHttpBackend::Create(server.url());
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
  for (int i = 0; i < 3; ++i) EXPECT_EQ(events[i].num_tokens, 1);
  EXPECT_EQ(events[3].kind, BackendEvent::Kind::kFinish);
  EXPECT_EQ(events[3].reported_output_tokens, 4);  // the usage total, not the 3 chunks
  EXPECT_EQ(events[3].cached_prompt_tokens, 2);

  for (const char* expected : {"HTTP 503", "decode failed", "ended before data: [DONE]", "closed inside the body"}) {
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
  EXPECT_NE(bodies[0].find("\"model\":\"smol.gguf\""), std::string::npos) << bodies[0];
  EXPECT_FALSE(OpenAiHttpBackend::Create("http://example.com:80").ok());  // not an IPv4 address
  EXPECT_FALSE(OpenAiHttpBackend::Create("tcp://127.0.0.1:80").ok());
}

TEST(OpenAiHttpBackendTest, GatewayInfoAndStreamWithoutUsage) {
  // tpserve's gateway: no meta in /v1/models; the context comes from /tokenize, the vocabulary from
  // the caller. A stream without a usage chunk reports no total (the runner keeps the chunk count).
  const std::string models = R"({"object":"list","data":[{"id":"tpserve","object":"model","owned_by":"tpserve"}]})";
  FakeOpenAiServer server(models, {Chunked({Chunk("a") + Chunk("b"), "data: [DONE]\n\n"}, true)});
  auto without_vocab = OpenAiHttpBackend::Create(server.url());
  ASSERT_TRUE(without_vocab.ok());
  EXPECT_EQ((*without_vocab)->Info().status().code(), StatusCode::kInvalidArgument);

  auto backend = OpenAiHttpBackend::Create(server.url(), 49152);
  ASSERT_TRUE(backend.ok());
  auto info = (*backend)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->model_name, "tpserve");
  EXPECT_EQ(info->vocab_size, 49152);
  EXPECT_EQ(info->context_length, 2048);
  auto id = (*backend)->Start(BenchRequest{{7}, 2});
  ASSERT_TRUE(id.ok());
  std::vector<BackendEvent> events = Drain(backend->get(), *id);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].num_tokens + events[1].num_tokens, 2);
  EXPECT_EQ(events[2].kind, BackendEvent::Kind::kFinish);
  EXPECT_EQ(events[2].reported_output_tokens, -1);
}

}  // namespace
}  // namespace tpserve::loadgen
