#include "bench/loadgen/openai_http_backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/loadgen/openai_completion.h"
#include "common/json.h"

namespace tpserve::loadgen {

namespace {

constexpr size_t kReadBytes = 64 << 10;
constexpr int kGetTimeoutMs = 10000;
constexpr size_t kErrorBodyBytes = 300;  // of a non-200 reply, kept for the error message

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string HttpError(int code, const std::string& body) {
  return "HTTP " + std::to_string(code) + ": " + body.substr(0, kErrorBodyBytes);
}

}  // namespace

StatusOr<std::unique_ptr<OpenAiHttpBackend>> OpenAiHttpBackend::Create(const std::string& server, int32_t vocab_size) {
  const std::string scheme = "http://";
  std::string rest = server.rfind(scheme, 0) == 0 ? server.substr(scheme.size()) : "";
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("server address '" + server + "' is not http://HOST:PORT");
  const std::string host = rest.substr(0, colon) == "localhost" ? "127.0.0.1" : rest.substr(0, colon);
  const std::string port_text = rest.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  in_addr address{};
  if (port_text.empty() || *end != '\0' || port < 1 || port > 65535 || inet_pton(AF_INET, host.c_str(), &address) != 1) {
    return InvalidArgument("server address '" + server + "' is not http://IPV4:PORT");
  }
  return std::unique_ptr<OpenAiHttpBackend>(new OpenAiHttpBackend(ntohl(address.s_addr), static_cast<uint16_t>(port), vocab_size));
}

OpenAiHttpBackend::~OpenAiHttpBackend() {
  for (auto& [id, stream] : streams_) close(stream->fd);
}

StatusOr<int> OpenAiHttpBackend::Send(const std::string& method, const std::string& path, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(Errno("socket"));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port_);
  to.sin_addr.s_addr = htonl(address_);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
    const Status status = Unavailable(Errno("connect to port " + std::to_string(port_)));
    close(fd);
    return status;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + std::string(inet_ntoa(to.sin_addr)) + ":" +
                        std::to_string(port_) + "\r\nConnection: close\r\n";
  if (!body.empty()) {
    request += "Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Status status = Unavailable(Errno("send to the server"));
      close(fd);
      return status;
    }
    sent += static_cast<size_t>(n);
  }
  return fd;
}

StatusOr<std::string> OpenAiHttpBackend::Fetch(const std::string& method, const std::string& path,
                                                const std::string& request_body) {
  ASSIGN_OR_RETURN(const int fd, Send(method, path, request_body));
  HttpResponseParser http;
  std::string body;
  std::vector<char> buffer(kReadBytes);
  Status status = OkStatus();
  while (status.ok() && !http.done()) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, kGetTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      status = Unavailable(method + " " + path + ": no reply from the server");
      break;
    }
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = Unavailable(Errno(method + " " + path));
    } else if (n == 0) {
      status = http.FinishAtEof();
      break;
    } else {
      status = http.Feed(std::string_view(buffer.data(), static_cast<size_t>(n)), &body);
    }
  }
  close(fd);
  RETURN_IF_ERROR(status);
  if (http.status_code() != 200) return Unavailable(method + " " + path + ": " + HttpError(http.status_code(), body));
  return body;
}

StatusOr<ServerInfo> OpenAiHttpBackend::Info() {
  RETURN_IF_ERROR(Fetch("GET", "/health").status());  // 503 while the model loads or no group serves
  ASSIGN_OR_RETURN(const std::string text, Fetch("GET", "/v1/models"));
  StatusOr<JsonValue> models = ParseJson(text);
  if (!models.ok()) return DataLoss("GET /v1/models: " + models.status().message());
  const JsonValue* data = models->Find("data");
  if (data == nullptr || !data->is_array() || data->size() == 0) return DataLoss("GET /v1/models: no data[0]");
  const JsonValue& model = (*data)[0];
  ServerInfo info;
  ASSIGN_OR_RETURN(info.model_name, model.GetString("id"));
  int64_t vocab = vocab_size_, context = 0;
  if (const JsonValue* meta = model.Find("meta")) {  // llama-server
    ASSIGN_OR_RETURN(vocab, meta->GetInt("n_vocab"));
    ASSIGN_OR_RETURN(context, meta->GetInt("n_ctx"));
  } else {  // tpserve's gateway: the context from /tokenize, the vocabulary from the command line
    if (vocab <= 0) return InvalidArgument("the server does not report its vocabulary: give --vocab-size");
    ASSIGN_OR_RETURN(const std::string tokenized, Fetch("POST", "/tokenize", R"({"prompt":"a"})"));
    StatusOr<JsonValue> reply = ParseJson(tokenized);
    if (!reply.ok()) return DataLoss("POST /tokenize: " + reply.status().message());
    ASSIGN_OR_RETURN(context, reply->GetInt("max_model_len"));
  }
  if (vocab <= 0 || vocab > INT32_MAX || context <= 0 || context > INT32_MAX) {
    return DataLoss("vocabulary / context size out of range");
  }
  info.vocab_size = static_cast<int32_t>(vocab);
  info.context_length = static_cast<int32_t>(context);
  model_ = info.model_name;
  return info;
}

StatusOr<uint64_t> OpenAiHttpBackend::Start(const BenchRequest& request) {
  ASSIGN_OR_RETURN(const int fd, Send("POST", "/v1/completions", OpenAiCompletionRequestJson(request, model_)));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto stream = std::make_unique<Stream>();
  stream->fd = fd;
  const uint64_t id = next_id_++;
  streams_.emplace(id, std::move(stream));
  return id;
}

void OpenAiHttpBackend::Cancel(uint64_t request_id) {
  auto it = streams_.find(request_id);
  if (it != streams_.end()) {
    close(it->second->fd);
    streams_.erase(it);
  }
  std::erase_if(ready_, [&](const BackendEvent& e) { return e.request_id == request_id; });
}

StatusOr<BackendEvent> OpenAiHttpBackend::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (ready_.empty()) {  // bytes may come that complete no event yet: wait on until the deadline
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return DeadlineExceeded("no event");
    std::vector<pollfd> fds;  // [streams in flight]
    std::vector<uint64_t> ids;
    for (const auto& [id, stream] : streams_) {
      fds.push_back(pollfd{stream->fd, POLLIN, 0});
      ids.push_back(id);
    }
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return Internal(Errno("poll"));
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Stream* stream = streams_.at(ids[i]).get();
      if (ReadStream(ids[i], stream)) {
        close(stream->fd);
        streams_.erase(ids[i]);
      }
    }
  }
  BackendEvent e = std::move(ready_.front());
  ready_.pop_front();
  return e;
}

bool OpenAiHttpBackend::ReadStream(uint64_t id, Stream* stream) {
  std::vector<char> buffer(kReadBytes);
  while (true) {
    const ssize_t n = read(stream->fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    BackendEvent failed;
    failed.kind = BackendEvent::Kind::kError;
    if (n < 0) {
      failed.error = Errno("read from the server");
      End(id, std::move(failed));
      return true;
    }
    std::string body;
    const Status status = n == 0 ? stream->http.FinishAtEof()
                                 : stream->http.Feed(std::string_view(buffer.data(), static_cast<size_t>(n)), &body);
    if (!status.ok()) {
      failed.error = status.message();
      End(id, std::move(failed));
      return true;
    }
    if (stream->http.headers_done() && stream->http.status_code() != 200) {
      stream->error_body += body.substr(0, kErrorBodyBytes);
      if (!stream->http.done()) continue;
      failed.error = HttpError(stream->http.status_code(), stream->error_body);
      End(id, std::move(failed));
      return true;
    }
    std::vector<SseEvent> events;
    if (const Status sse = stream->sse.Feed(body, &events); !sse.ok()) {
      failed.error = sse.message();
      End(id, std::move(failed));
      return true;
    }
    for (const SseEvent& event : events) {
      if (OnSseEvent(id, stream, event)) return true;
    }
    if (stream->http.done()) {  // the body ended (or the peer closed) before [DONE]
      failed.error = "the stream ended before data: [DONE]";
      End(id, std::move(failed));
      return true;
    }
  }
}

bool OpenAiHttpBackend::OnSseEvent(uint64_t id, Stream* stream, const SseEvent& event) {
  StatusOr<OpenAiCompletionEvent> parsed = ParseOpenAiCompletionEvent(event.data);
  BackendEvent out;
  if (!parsed.ok() || !parsed->error.empty()) {
    out.kind = BackendEvent::Kind::kError;
    out.error = parsed.ok() ? "server error event: " + parsed->error : parsed.status().message();
    End(id, std::move(out));
    return true;
  }
  if (parsed->num_tokens > 0) {
    out.request_id = id;
    out.kind = BackendEvent::Kind::kTokens;
    out.num_tokens = static_cast<int32_t>(parsed->num_tokens);
    ready_.push_back(out);
  }
  if (parsed->completion_tokens >= 0) {
    stream->completion_tokens = parsed->completion_tokens;
    stream->cached_prompt_tokens = parsed->cached_prompt_tokens;
  }
  if (!parsed->is_done) return false;
  out.kind = BackendEvent::Kind::kFinish;
  out.num_tokens = 0;
  out.reported_output_tokens = static_cast<int32_t>(stream->completion_tokens);  // < 0: no usage came
  out.cached_prompt_tokens = static_cast<int32_t>(stream->cached_prompt_tokens);
  End(id, std::move(out));
  return true;
}

void OpenAiHttpBackend::End(uint64_t id, BackendEvent event) {
  event.request_id = id;
  ready_.push_back(std::move(event));
}

}  // namespace tpserve::loadgen
